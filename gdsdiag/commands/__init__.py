"""The commands layer: one module per ``gdsdiag`` command, each a function that does the work
and returns a report object carrying its exit code. No option parsing, no rendering, no
``sys.exit`` here: ``gdsdiag.cli`` parses, renders the report and exits with ``report.exit_code``,
and other code (``validate``, ``diff``, tests) calls these functions directly."""
