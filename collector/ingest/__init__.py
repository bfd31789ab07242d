"""How batches come in: decode and validate, the ingest queue, group commit."""
