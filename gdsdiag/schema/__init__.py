"""The JSON documents the commands write, as types: one module per document family, each a
``TypedDict`` per object of docs/json.md. The code that builds a document is annotated with these
types, so mypy checks every key it writes; tests/test_json_schema.py checks docs/json.md against
them and them against what the commands print on committed fixtures.

This package imports nothing from gdsdiag (any layer may use it), and the builders import it only
for type checking, so it costs nothing at run time.

``total=False`` classes hold the keys a document carries only sometimes (named in docs/json.md).
"""
