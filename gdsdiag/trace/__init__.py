"""gdsdiag trace: live per-I/O route verdicts from eBPF probes (bcc)."""
