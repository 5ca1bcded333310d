"""Longest functions in src/, counted without their docstrings."""

import ast
import pathlib
import sys

rows = []
for p in pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src").rglob("*.py"):
    for n in ast.walk(ast.parse(p.read_text())):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = n.body
            start = n.lineno
            doc = 0
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                doc = body[0].end_lineno - body[0].lineno + 1
            rows.append((n.end_lineno - start + 1 - doc, str(p), n.name))
rows.sort(reverse=True)
for r in rows[: int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    print(*r)
print("over 60:", sum(r[0] > 60 for r in rows))
