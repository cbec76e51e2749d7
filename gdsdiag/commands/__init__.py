"""The CLI layer, one module per ``gdsdiag`` command: parse the options, call the package that does
the work (which returns a report carrying its exit code, e.g. ``topology.report.topology``,
``check.report.check``), render the report as text or JSON, and exit with its code. Errors are not
caught here: ``gdsdiag.cli.main`` is the one boundary that turns them into a line and a code."""
