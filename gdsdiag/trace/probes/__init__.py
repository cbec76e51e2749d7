"""Kernel and library plumbing: the BPF program, its probes and the ring it writes (no verdicts here)."""
