"""gpufleet command line: wires agent and collector objects together."""
