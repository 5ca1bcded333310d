"""The shape of the code: short functions and modules, private helpers with few parameters, a public surface that is
``__all__``, and what people read kept out of the statistics."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import mlflow_recsys

SRC = Path(mlflow_recsys.__file__).parent
#: Longest function body allowed in the package, in lines from ``def`` to its last line, its docstring not counted.
MAX_FUNCTION_LINES = 60
#: Longest module, in lines.
MAX_MODULE_LINES = 600
#: Most parameters a private helper takes (self and cls not counted, ``*args`` and ``**kwargs`` one each): more are
#: passed as the object they belong to.
MAX_PRIVATE_PARAMETERS = 5


def function_lengths(root: Path) -> list[tuple[int, str]]:
    """(lines without the docstring, "file:line name") of every function and method under ``root``."""
    rows = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            first = node.body[0]
            doc = 0
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                doc = first.end_lineno - first.lineno + 1
            where = f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"
            rows.append((node.end_lineno - node.lineno + 1 - doc, where))
    return rows


def test_no_function_is_longer_than_sixty_lines_without_its_docstring():
    long = sorted((n, where) for n, where in function_lengths(SRC) if n > MAX_FUNCTION_LINES)
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into helpers): {long}"


def test_the_count_leaves_out_the_docstring_only(tmp_path):
    (tmp_path / "m.py").write_text(
        'def f():\n    """One\n    two."""\n    a = 1\n    return a\n\n\ndef g():\n    pass\n'
    )
    assert sorted(n for n, _ in function_lengths(tmp_path)) == [2, 3]


def test_no_module_is_longer_than_six_hundred_lines():
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by job): {long}"


def private_parameter_counts(root: Path) -> dict[str, int]:
    """``"file:line name"`` -> parameter count of every private function and method under ``root``."""
    counts = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
                if node.name.startswith("__") and node.name.endswith("__"):
                    continue
                a = node.args
                named = [x for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                counts[f"{path.relative_to(root)}:{node.lineno} {node.name}"] = (
                    len(named) + (a.vararg is not None) + (a.kwarg is not None)
                )
    return counts


def test_no_private_helper_takes_more_than_five_parameters():
    many = {where: n for where, n in private_parameter_counts(SRC).items() if n > MAX_PRIVATE_PARAMETERS}
    assert not many, f"private helpers over {MAX_PRIVATE_PARAMETERS} parameters (pass the object): {many}"


def test_the_parameter_count_takes_every_kind_and_leaves_out_self(tmp_path):
    (tmp_path / "m.py").write_text(
        "class C:\n    def _m(self, a, /, b, *c, d, **e):\n        pass\n\n    def __init__(self, a):\n        pass\n"
    )
    assert list(private_parameter_counts(tmp_path).values()) == [5]


def test_every_public_name_of_a_public_module_is_in_its_all():
    outside = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if any(p.startswith("_") and p != "__init__" for p in parts):
            continue  # a private module: its names are not API
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        listed = set(module.__all__)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            outside += [f"{module.__name__}.{n}" for n in names if not n.startswith("_") and n not in listed]
    assert not outside, f"public names missing from their module's __all__ (list them, or make them private): {outside}"


def test_presentation_lives_in_report_and_the_statistics_do_not_import_it():
    stats = SRC / "stats"
    assert not {"_reporting.py", "_html.py", "_latex.py", "_plots.py", "_text.py"} & {
        p.name for p in stats.glob("*.py")
    }
    assert {"_escaping.py", "_text.py", "_latex.py", "_html.py", "_plots.py", "_citations.py"} <= {
        p.name for p in (SRC / "report").glob("*.py")
    }
    for path in stats.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level only: methods call it lazily
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else ([a.name for a in node.names] if isinstance(node, ast.Import) else [])
            )
            assert not [n for n in names if n.startswith("mlflow_recsys.report")], f"{path.name} imports {names}"


def test_importing_the_statistics_loads_no_report_code():
    code = (
        "import sys, mlflow_recsys.stats\nprint(sorted(m for m in sys.modules if m.startswith('mlflow_recsys.report')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


#: Attribute uses that write to the terminal.
_TERMINAL = {("click", "echo"), ("click", "secho"), ("sys", "stdout"), ("sys", "stderr")}


def _output_calls(path: Path) -> list[str]:
    """Each use of ``print``, ``click.echo``/``secho`` or ``sys.stdout``/``sys.stderr`` in ``path``, as "line name"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id == "print":
            found.append(f"{node.lineno} print")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in _TERMINAL:
                found.append(f"{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_only_the_command_line_prints_library_code_logs():
    printing = {
        str(path.relative_to(SRC)): calls
        for path in sorted(SRC.rglob("*.py"))
        if path.name not in ("cli.py", "_cli_group.py") and (calls := _output_calls(path))
    }
    assert not printing, f"library code writes to the terminal (log, or take an echo from the caller): {printing}"


def test_the_output_check_sees_a_print_passed_as_a_default(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import sys\n\n\ndef f(echo=print):\n    sys.stderr.write('x')\n")
    assert _output_calls(module) == ["4 print", "5 sys.stderr"]
