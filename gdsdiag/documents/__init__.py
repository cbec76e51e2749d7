"""The ``--json`` documents, one module per command that has one (topology, check, diff, explain):
each turns a report into its ``schema/`` TypedDict. They sit with the reports, below the
renderers, because diff and the support bundle compare and store them."""
