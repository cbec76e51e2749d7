"""Issue 23: a broad except (bare, Exception, BaseException) anywhere in the package either
re-raises, or says on its line why catching everything is right there. None is silent: a reader of
the code sees the reason, a user the failure."""

from __future__ import annotations

import ast
import os

from conftest import REPO

PKG = os.path.join(REPO, "gdsdiag")


def _broad(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return t is None or any(isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names)


def test_every_broad_except_reraises_or_says_why():
    bad = []
    for dirpath, _, files in os.walk(PKG):
        for fn in files:
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, REPO)
            if not fn.endswith(".py"):
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.splitlines()
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ExceptHandler) and _broad(node):
                    reraises = isinstance(node.body[-1], ast.Raise) and node.body[-1].exc is None
                    if not reraises and "#" not in lines[node.lineno - 1]:
                        bad.append(f"{rel}:{node.lineno}")
    assert not bad, f"catch what can be raised there, or say why everything: {bad}"
