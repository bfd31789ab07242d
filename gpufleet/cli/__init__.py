"""``gpufleet`` command line: one module per command; the only place objects are wired."""
