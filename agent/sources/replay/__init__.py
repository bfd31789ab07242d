"""A source that replays recorded GPU traces."""
