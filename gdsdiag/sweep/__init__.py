"""gdsdiag sweep: read/write throughput sweeps whose route and data are verified."""
