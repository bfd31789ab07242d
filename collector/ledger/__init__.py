"""The collector's durable state behind one interface (SQLite)."""
