"""The files of a comparison: report tables, JSON tables, HTML, LaTeX, methods and settings, plots and seed
files, written into a folder without MLflow."""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mlflow_recsys.report import _notes as notes
from mlflow_recsys.report._analyses import (
    analysis_heading,
    ordered_analyses,
    primary_analysis_text,
    seed_averaging_text,
)
from mlflow_recsys.report._citations import references_bibtex
from mlflow_recsys.report._escaping import csv_safe_frame, escape_markdown
from mlflow_recsys.report._html import report_html
from mlflow_recsys.report._plots import forest_plot, seed_spread_plot
from mlflow_recsys.report._provenance import provenance_html, provenance_markdown
from mlflow_recsys.settings_schema import settings_of
from mlflow_recsys.stats import ComparisonReport, SeedSpread
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.tracking._candidates import CandidatePlan
from mlflow_recsys.tracking._naming import pair_label

#: The comparison run's artifacts that :func:`~mlflow_recsys.tracking._queries.load_comparison` reads: the
#: representative-seed report and, when a model has seeds, the seed-averaged one, each as
#: :meth:`~mlflow_recsys.stats.ComparisonReport.save` writes it, and the settings.
REPORT_DIR, SEED_AVERAGED_REPORT_DIR, SETTINGS_FILE = "report", "seed_averaged_report", "settings.json"


def write_json_files(
    out: Path, source_ids: list[str], plan: CandidatePlan, settings: ComparisonSettings, key_map: list[dict]
) -> None:
    """``source_runs.json`` (every source run, by model and seed), ``settings.json`` (the fields of ``settings``,
    which ``ComparisonSettings(**json.load(file))`` reads back) and ``metric_names.json``."""
    (out / "source_runs.json").write_text(
        json.dumps(
            {"run_ids": source_ids, "by_model": plan.groups, "representative_seeds": plan.representative_seeds},
            indent=2,
        )
    )
    (out / SETTINGS_FILE).write_text(json.dumps(dataclasses.asdict(settings), indent=2))
    (out / "metric_names.json").write_text(json.dumps(key_map, indent=2))


@dataclass(frozen=True)
class ComparisonFiles:
    """Everything a comparison run's files are rendered from: the report (saved as the run's main artifact,
    ``report/``), the seed-averaged one, the seed tables, provenance, the settings as logged, and the rest."""

    report: ComparisonReport
    averaged: ComparisonReport | None
    spreads: dict[tuple[str, str], SeedSpread]
    provenance: dict
    settings: dict
    run_name: str
    primary: str | None
    declared: bool = False
    link: str = ""

    @property
    def analysis(self) -> str:
        return self.settings["primary_analysis_used"]

    @property
    def labelled_spreads(self) -> dict[str, SeedSpread]:
        return {pair_label(b, c): spread for (b, c), spread in self.spreads.items()}

    def _common(self) -> dict:
        return {"declared": self.declared, "averaged": self.averaged, "analysis": self.analysis}

    def note(self) -> str:
        shown = self.labelled_spreads
        return notes.run_note(self.report, shown, self.primary, self.provenance, **self._common(), link=self.link)

    def headline(self) -> str:
        return notes.headline_sentence(self.report, self.primary, self.averaged, self.analysis)

    def write(self, out: Path) -> tuple[pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None]:
        """Save the reports (``report/``, ``seed_averaged_report/``), then render every other file from them into
        ``out``; the report frame, the seed-averaged one and the seed table (None when not made)."""
        self.report.save(out / REPORT_DIR)
        if self.averaged is not None:
            self.averaged.save(out / SEED_AVERAGED_REPORT_DIR)
        frame, averaged_frame = write_report_frames(out, self.report, self.averaged)
        seed_frame = write_seed_files(out, self.spreads)
        write_texts(out, self.report, self.averaged, self.provenance, self.settings)
        summary = notes.summary_text(
            self.report, self.labelled_spreads, self.primary, self.provenance, **self._common()
        )
        (out / "summary.txt").write_text(summary + self.link)
        forest_plot(
            dict(ordered_analyses(self.report, self.averaged, self.analysis))[self.analysis], out / "forest.png"
        )
        page = report_html(
            self.report,
            self.labelled_spreads,
            primary=self.primary,
            title=self.run_name,
            forest_png=(out / "forest.png").read_bytes(),
            seed_png=(out / "seed_spread.png").read_bytes() if seed_frame is not None else None,
            provenance_html=provenance_html(self.provenance),
            primary_declared=self.declared,
            seed_averaged=self.averaged,
            primary_analysis=self.analysis,
        )
        (out / "report.html").write_text(page)
        return frame, averaged_frame, seed_frame


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """CSV whose text a spreadsheet will not run as formulas, every non-number quoted."""
    csv_safe_frame(frame).to_csv(path, index=False, quoting=csv.QUOTE_NONNUMERIC)


def write_report_frames(
    out: Path, report: ComparisonReport, averaged: ComparisonReport | None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``report.csv``/``.parquet`` and, for a seed-averaged report, ``seed_averaged.csv``/``.parquet``; their frames."""
    frame = report.to_frame()
    _write_csv(frame, out / "report.csv")
    frame.to_parquet(out / "report.parquet", index=False)
    if averaged is None:
        return frame, None
    averaged_frame = averaged.to_frame()
    _write_csv(averaged_frame, out / "seed_averaged.csv")
    averaged_frame.to_parquet(out / "seed_averaged.parquet", index=False)
    return frame, averaged_frame


def write_seed_files(out: Path, spreads: dict[tuple[str, str], SeedSpread]) -> pd.DataFrame | None:
    """``seed_spread.csv``, ``seed_spread_per_seed.csv`` and ``seed_spread.png``; the seed table, None without
    seeds. Each per-seed row names its pair in ``baseline`` and ``candidate``, and in ``comparison`` as
    :func:`~mlflow_recsys.tracking._naming.pair_label` writes it (one text per pair, so the plot keeps pairs apart)."""
    if not spreads:
        return None
    seed_frame = pd.concat([s.to_frame() for s in spreads.values()], ignore_index=True)
    _write_csv(seed_frame, out / "seed_spread.csv")
    per_seed = pd.concat(
        [
            s.per_seed_frame().assign(baseline=b, candidate=c, comparison=pair_label(b, c))
            for (b, c), s in spreads.items()
        ],
        ignore_index=True,
    )
    _write_csv(per_seed, out / "seed_spread_per_seed.csv")
    seed_spread_plot(per_seed, out / "seed_spread.png")
    return seed_frame


def write_texts(
    out: Path, report: ComparisonReport, averaged: ComparisonReport | None, provenance: dict, settings: dict
) -> None:
    """``report.md``, ``methods.md`` (with every setting, as logged), ``report.tex``, ``provenance.json`` and
    ``references.bib`` (the entries the reports cite)."""
    what = provenance_markdown(provenance)
    tables, methods = report.to_markdown(), report.methods_text()
    runs_used = "; ".join(f"{m}: {i['why']}" for m, i in provenance["models"].items())
    latex = report.to_latex(title=f"One trained run per model ({runs_used}).")
    if averaged is not None:
        analysis = settings["primary_analysis_used"]
        methods += "\n\n" + seed_averaging_text(averaged).strip()
        methods += " " + primary_analysis_text(analysis, settings["primary_analysis"])
        shown = dict(ordered_analyses(report, averaged, analysis))
        tables = "\n\n".join(f"## {analysis_heading(kind, analysis)}\n\n{shown[kind].to_markdown()}" for kind in shown)
        titles = {
            "representative-seed": f"one trained run per model ({runs_used}).",
            "seed-averaged": "each model's per-user values averaged over its training seeds.",
        }
        labels = {"representative-seed": "tab:comparison", "seed-averaged": "tab:seed-averaged"}
        latex = "\n".join(
            shown[kind].to_latex(label=labels[kind], title=f"{analysis_heading(kind, analysis)}, {titles[kind]}")
            for kind in shown
        )
    (out / "report.tex").write_text(latex)
    (out / "report.md").write_text(tables + "\n\n" + what + "\n")
    (out / "methods.md").write_text(methods + "\n\n" + what + "\n\n" + _settings_markdown(settings) + "\n")
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2))
    (out / "references.bib").write_text(references_bibtex(*(r for r in (report, averaged) if r is not None)))


#: What a logged setting that is not a :class:`ComparisonSettings` field means, for the settings table.
_LOGGED_ONLY = {
    "primary_analysis_used": "the analysis the conclusion rests on (primary_analysis, auto resolved)",
    "model_tag": "run tag that names the model",
    "compared_metrics": "the metric keys compared",
    "scipy_version": "the SciPy that computed the tests and intervals",
}


def _settings_markdown(settings: dict) -> str:
    """The comparison's settings as a markdown table, in the order they are logged as params, each with what it
    means (its declaration's help)."""
    meaning = {name: s.help for name, (_, s) in settings_of(ComparisonSettings).items()} | _LOGGED_ONLY
    rows = "\n".join(
        f"| {escape_markdown(name)} | {escape_markdown(str(value))} | {escape_markdown(meaning[name])} |"
        for name, value in settings.items()
    )
    return (
        "## Settings\n\nEvery setting of this comparison, as logged in the run's params:\n\n"
        "| setting | value | meaning |\n|---|---|---|\n" + rows
    )
