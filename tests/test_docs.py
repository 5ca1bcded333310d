"""Every code block of README.md and of the guide and how-to pages runs, so the docs cannot rot.

How a page is run (one test per page, blocks in document order):

- ``python`` blocks run in this process, in one namespace per page, in a fresh temporary
  working directory whose MLflow store is ``sqlite:///<tmp>/mlruns.db`` (``MLFLOW_TRACKING_URI``).
- ``bash`` blocks run through ``bash -eo pipefail`` in the same directory, with the virtualenv's
  ``bin`` first on ``PATH``. Variables a block sets carry over to the next bash block of the page
  (each block runs with ``set -a`` and its exported state is saved). Every process a block leaves
  running (``mlflow server ... &``) is ended when the page is done.
- The directory holds a copy of ``MLproject``, ``conda.yaml`` and ``examples/``, as a checkout does, so
  ``mlflow run .`` works there. ``PORT`` holds a free port on 127.0.0.1 for pages that start a
  server (they default to 5000 when it is unset, as on a reader's machine).
- A ``text`` block right after ``<!-- docs-test: output -->`` must equal what the block before it
  printed (trailing spaces ignored; ``...`` stands for any text, e.g. a run id).
- ``json``, ``yaml`` and ``toml`` blocks must parse; ``bibtex`` must equal the library's references;
  a ``text`` block of ``mlflow-recsys`` command lines must name real commands and options. Other
  ``text`` blocks (a listing, a diagram) are counted as prose.
- ``<!-- docs-test: skip (reason) -->`` right before a block opts it out; each such block is a
  skipped test here, so pytest's summary (``-ra``) lists it with its reason. Nothing is skipped
  silently, and a block in a language this file does not know fails the test.

Regenerate the output blocks after a change that moves the numbers with
``DOCS_UPDATE_OUTPUT=1 .venv/bin/python -m pytest tests/test_docs.py`` (it rewrites the stale blocks
and still fails once), then read the diff: put back any ``...`` that stood for a run id. With ``-s``
each block's run time is printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PAGES = [
    ROOT / "README.md",
    ROOT / "docs" / "index.md",
    ROOT / "docs" / "citing.md",
    *sorted((ROOT / "docs" / "guide").glob("*.md")),
    *sorted((ROOT / "docs" / "howto").glob("*.md")),
]
UPDATE = os.environ.get("DOCS_UPDATE_OUTPUT") == "1"

PYTHON = {"python"}
SHELL = {"bash"}
PARSED = {"json", "yaml", "toml", "bibtex"}
TEXT = {"text"}
KNOWN = PYTHON | SHELL | PARSED | TEXT

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>skip|output)\s*(?:\((?P<reason>.*)\))?\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str | None  # "skip", "output" or None
    reason: str | None
    end: int  # 1-based line of the closing fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


#: The longest a page's shell block may run before it counts as hung (and fails, exit None).
BLOCK_TIMEOUT_S = 900


def parse_blocks(page: Path) -> list[Block]:
    """Fenced blocks of a Markdown page, with the docs-test marker just before each."""
    lines = page.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        j = i + 1
        while j < len(lines) and not (lines[j].startswith(indent + fence) and not lines[j].strip().strip("`")):
            j += 1
        body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : j]]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.match(lines[k]) if k >= 0 else None
        blocks.append(
            Block(
                page=page,
                line=i + 1,
                lang=match["lang"].lower(),
                code="\n".join(body) + "\n",
                marker=marker["kind"] if marker else None,
                reason=(marker["reason"] or "").strip() if marker else None,
                end=j + 1,
            )
        )
        i = j + 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in parse_blocks(page)]
SKIPPED = [b for b in ALL_BLOCKS if b.marker == "skip"]


def test_every_block_is_accounted_for():
    """Each block is run, compared, parsed, skipped with a reason, or plain text: none is lost."""
    counts: dict[str, int] = {}
    problems = []
    for b in ALL_BLOCKS:
        if b.lang not in KNOWN:
            problems.append(f"{b.where}: language {b.lang!r} is not one of {sorted(KNOWN)}")
        if b.marker == "skip" and not b.reason:
            problems.append(f"{b.where}: a skip marker needs a reason: <!-- docs-test: skip (why) -->")
        if b.marker == "output" and b.lang not in TEXT:
            problems.append(f"{b.where}: an output block must be a text block")
        kind = (
            "skipped"
            if b.marker == "skip"
            else "run"
            if b.lang in PYTHON | SHELL
            else "output"
            if b.marker == "output"
            else "parsed"
            if b.lang in PARSED
            else "cli synopsis"
            if _is_synopsis(b)
            else "prose text"
        )
        counts[kind] = counts.get(kind, 0) + 1
    print("docs code blocks:", ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
    for b in SKIPPED:
        print(f"  skipped {b.where} ({b.lang}): {b.reason}")
    assert not problems, "\n".join(problems)
    assert counts.get("run", 0) >= 20


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_skipped_block(block):
    """One visible skip per opted-out block, with its reason (listed by pytest -ra)."""
    pytest.skip(f"{block.where} ({block.lang}) not run: {block.reason}")


# -- running a page -----------------------------------------------------------------


def _is_synopsis(block: Block) -> bool:
    return (
        block.lang in TEXT
        and block.marker is None
        and any(line.strip().startswith("mlflow-recsys ") for line in block.code.splitlines())
    )


# A number standing alone (not inside a run id such as "476bc80"): 188, -0.011371, 2.51 (of 2.51%), 1,368.
_NUMBER = r"(?<![\w.])[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])"


def _matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is the shown ``expected`` output, ``...`` standing for any text.

    Numbers may differ by float noise (1e-4 absolute plus 1e-4 relative): torch's and BLAS's sums depend on the
    CPU's vector width and thread count, so an ELSA trained with the same seed on another machine scores in
    the sixth decimal differently. The text around them, and every count, must match exactly.
    """

    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    shown, parts, numbers = norm(expected), [], []
    for i, piece in enumerate(shown.split("...")):
        if i:
            parts.append(".*?")
        end = 0
        for found in re.finditer(_NUMBER, piece):
            parts += [re.escape(piece[end : found.start()]), f"({_NUMBER})"]
            numbers.append(found.group())
            end = found.end()
        parts.append(re.escape(piece[end:]))
    match = re.fullmatch("".join(parts), norm(actual), re.S)
    if match is None:
        return False
    for want, got in zip(numbers, match.groups(), strict=True):
        a, b = float(want.replace(",", "")), float(got.replace(",", ""))
        if want != got and abs(a - b) > 1e-4 + 1e-4 * abs(a):
            return False
    return True


def test_shown_output_matches_up_to_float_noise_and_nothing_else():
    assert _matches("diff -0.011371 over 188 users\nrun ...", "diff -0.011372 over 188 users\nrun 4f0a\n")
    assert _matches("ratio 0.003367", "ratio 0.003338")  # BLAS noise on a tiny retraining SD
    assert not _matches("over 188 users", "over 189 users")
    assert not _matches("diff -0.0114", "diff -0.0116")
    assert not _matches("diff -0.0114", "diff 0.0114")
    assert not _matches("run 476bc80", "run 476bc81")  # an id is text, not a number
    assert not _matches("1,368 items", "1,369 items") and _matches("1,368 items", "1,368 items")
    assert not _matches("p = 0.2080; not significant", "p = 0.2080; significant")


class PageRunner:
    """Runs one page's blocks in order, keeping Python and shell state between blocks."""

    def __init__(self, page: Path, workdir: Path):
        self.page = page
        self.workdir = workdir
        self.namespace: dict = {"__name__": "__docs__"}
        self.state = workdir / ".docs-shell-state"
        self.groups: list[int] = []
        self.uri = f"sqlite:///{workdir}/mlruns.db"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = str(s.getsockname()[1])
        self.env.update(
            MLFLOW_TRACKING_URI=self.uri,
            PATH=f"{BIN}{os.pathsep}{self.env.get('PATH', '')}",
            MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false",
            PYTHONUNBUFFERED="1",
            PORT=self.port,
        )
        for name in ("MLproject", "conda.yaml"):
            shutil.copy(ROOT / name, workdir / name)
        shutil.copytree(ROOT / "examples", workdir / "examples")  # the pages run what a checkout holds

    def python(self, block: Block) -> str:
        out = io.StringIO()
        code = compile(block.code, f"{block.where}", "exec")
        with contextlib.redirect_stdout(out):
            exec(code, self.namespace)  # noqa: S102 - the docs' own code, run on purpose
        sys.stdout.write(out.getvalue())
        return out.getvalue()

    def bash(self, block: Block) -> str:
        script = (
            f"[ -f {self.state} ] && source {self.state}\nset -a\n{block.code}\n"
            f"export -p | grep -v -E '^declare -x (PWD|OLDPWD|SHLVL|_)=' > {self.state}\n"
        )
        stdout, stderr = self.workdir / ".docs-stdout", self.workdir / ".docs-stderr"
        with open(stdout, "w") as out, open(stderr, "w") as err:
            proc = subprocess.Popen(
                ["bash", "-eo", "pipefail", "-c", script],
                cwd=self.workdir,
                env=self.env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.groups.append(proc.pid)
            try:
                # A cut-off for a block that hangs, not a speed limit: the study on docs/guide/studies.md takes about
                # three minutes alone, and past five on a machine busy with other work.
                code = proc.wait(timeout=BLOCK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
        text = stdout.read_text()
        sys.stdout.write(text)
        assert code == 0, (
            f"{block.where}: bash block exited {code}\n--- stdout\n{text[-3000:]}\n"
            f"--- stderr\n{stderr.read_text()[-3000:]}"
        )
        return text

    def close(self) -> None:
        """End what the page's shell blocks left running: SIGTERM, then SIGKILL after 20 s."""
        alive = []
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGTERM)
                alive.append(group)
        deadline = time.monotonic() + 20
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [g for g in alive if _group_exists(g)]
        for group in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


def _group_exists(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_parsed(block: Block) -> None:
    if block.lang == "json":
        json.loads(block.code)
    elif block.lang == "yaml":
        list(yaml.safe_load_all(block.code))
    elif block.lang == "toml":
        import tomllib

        tomllib.loads(block.code)
    elif block.lang == "bibtex":
        from mlflow_recsys.report import references_bibtex

        assert block.code.strip() == references_bibtex().strip(), f"{block.where}: BibTeX differs from the library's"


def _check_synopsis(block: Block) -> None:
    """Each ``mlflow-recsys`` line names a real command, and each ``--option`` is one of its options."""
    from mlflow_recsys.cli import cli

    for line in block.code.splitlines():
        words = line.split("#")[0].split()
        if not words or words[0] != "mlflow-recsys":
            continue
        command = cli.commands.get(words[1])
        assert command is not None, f"{block.where}: no command {words[1]!r} in {line!r}"
        options = {opt for param in command.params for opt in param.opts + param.secondary_opts}
        unknown = [w for w in words[2:] if w.startswith("--") and w.split("=")[0] not in options]
        assert not unknown, f"{block.where}: {words[1]} has no option {unknown} ({line!r})"


def _update_output(block: Block, actual: str) -> None:
    lines = block.page.read_text().splitlines(keepends=True)
    indent = re.match(r"[ \t]*", lines[block.line - 1]).group(0)
    body = "".join(f"{indent}{line}".rstrip() + "\n" for line in actual.strip("\n").splitlines())
    lines[block.line : block.end - 1] = [body]
    block.page.write_text("".join(lines))


@contextlib.contextmanager
def _isolated_mlflow(runner: PageRunner, monkeypatch):
    """Point this process's MLflow at the page's store, and put everything back afterwards."""
    import mlflow.tracking.fluent as fluent

    saved_environ = dict(os.environ)
    monkeypatch.chdir(runner.workdir)
    for key in [k for k in os.environ if k.startswith("MLFLOW_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", runner.uri)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    monkeypatch.setenv("PORT", runner.port)
    mlflow.set_tracking_uri(runner.uri)
    fluent._active_experiment_id = None
    try:
        with warnings.catch_warnings():
            yield
    finally:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        os.environ.clear()
        os.environ.update(saved_environ)
        mlflow.set_tracking_uri(None)
        fluent._active_experiment_id = None
        runner.close()


def _check_reporting(namespace: dict, printed: str) -> None:
    """The generated Methods paragraph and result sentence are printed, with the real settings and n."""
    report = namespace["report"]
    assert report.methods_text() in printed
    assert "B = 9,999" in report.methods_text() and f"all {report.family_size} hypotheses" in report.methods_text()
    assert f"n = {report.comparisons[0].n_units:,} users" in printed


def _check_running(namespace: dict, printed: str) -> None:
    """The comparison logged from Python is a FINISHED comparison run of the page's store."""
    run = mlflow.get_run(namespace["outcome"].run_id)
    assert run.info.status == "FINISHED" and run.data.tags["recsys.role"] == "comparison"
    # One each from: the command, `mlflow run -e compare`, compare_runs, and the pasted compare URL.
    comparisons = mlflow.search_runs(experiment_names=["guide"], filter_string="tags.`recsys.role` = 'comparison'")
    assert len(comparisons) == 4 and set(comparisons["status"]) == {"FINISHED"}


#: Checks on a page's final namespace and everything it printed, beyond its output blocks.
PAGE_CHECKS = {"docs/guide/reporting.md": _check_reporting, "docs/guide/running.md": _check_running}

RUN_PAGES = [p for p in PAGES if any(b.marker != "skip" for b in parse_blocks(p))]
#: Pages that start `mlflow server --app-name recsys`; they run with the server-pages suite. The others run with
#: `make docs-test` (marker walkthrough): together they take minutes, which `make test` cannot spare.
SERVER_PAGES = {ROOT / "docs" / "howto" / "server-page.md"}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, marks=pytest.mark.server_pages if p in SERVER_PAGES else pytest.mark.walkthrough)
        for p in RUN_PAGES
    ],
    ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES],
)
def test_page(page, tmp_path, monkeypatch):
    blocks = parse_blocks(page)
    runner = PageRunner(page, tmp_path)
    printed = None
    stale = []
    all_printed: list[str] = []
    with _isolated_mlflow(runner, monkeypatch):
        for block in blocks:
            started = time.perf_counter()
            if block.marker == "skip":
                printed = None
            elif block.lang in PYTHON:
                printed = runner.python(block)
            elif block.lang in SHELL:
                printed = runner.bash(block)
            elif block.marker == "output":
                assert printed is not None, f"{block.where}: an output block must follow a python or bash block"
                if not _matches(block.code, printed):
                    stale.append((block, printed))
            elif block.lang in PARSED:
                _check_parsed(block)
            elif _is_synopsis(block):
                _check_synopsis(block)
            print(f"[docs] {block.where} {block.lang or '-'} {time.perf_counter() - started:.1f} s")
            all_printed.append(printed or "")
        check = PAGE_CHECKS.get(str(page.relative_to(ROOT)))
        if check is not None:
            check(runner.namespace, "".join(all_printed))
    if stale and UPDATE:
        for block, actual in reversed(stale):
            _update_output(block, actual)
    assert not stale, (
        "\n\n".join(
            f"{b.where}: the output shown differs from what the code prints now\n--- shown\n{b.code}--- printed\n{a}"
            for b, a in stale
        )
        + "\n(DOCS_UPDATE_OUTPUT=1 rewrites the shown output)"
    )
