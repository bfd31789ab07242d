"""Applied intervals turned into priced, carbon-counted ledger deltas."""
