"""gdsdiag exporter: nvidia-fs statistics, check/validate verdicts, cuFile processes and (with
--trace) live route counters, on one HTTP port for Prometheus."""
