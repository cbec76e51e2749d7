"""The trace's model: events in, verdicts out. Pure: no I/O, no probes, no processes (tests/test_layers.py)."""
