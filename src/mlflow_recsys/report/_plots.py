"""Figures of a comparison: a forest plot of the differences and the per-seed differences; of a study over datasets, the
forest plot of a meta-analysis and the critical-difference diagram of the ranks.

matplotlib is imported on first use, with the non-interactive Agg backend, so plots render on machines without a
display.

Every text in these figures is drawn literally: model names, metric keys and seeds come from users, and matplotlib would
otherwise read ``$...$`` as mathtext (or fail on an unbalanced formula), hand text to TeX when ``text.usetex`` is set,
and drop legend labels that start with ``_``.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlflow_recsys._digests import text_digest
from mlflow_recsys.report._escaping import visible_text
from mlflow_recsys.report._rows import disagreement_words, format_level, interval_disagrees, interval_level

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport
    from mlflow_recsys.stats._meta import MetaAnalysis
    from mlflow_recsys.stats._ranks import RankAnalysis

#: rcParams under which every figure is built and saved: no mathtext, no TeX, whatever the user's settings.
# Keys typed Any: recent matplotlib types rc_context's keys as a Literal of every rc name, older releases as str.
LITERAL_TEXT: dict[Any, bool] = {"text.parse_math": False, "text.usetex": False}
#: Widest name drawn in a figure; longer names are cut and tagged with a hash, as in the run notes.
LABEL_WIDTH = 32


def plot_label(name: object, width: int = LABEL_WIDTH) -> str:
    """``name`` as one line of at most ``width`` characters: control characters shown as ``\\n``-style escapes, a longer
    name cut and ended with ``…`` and six hex digits of its SHA-256, so cut names stay distinct."""
    text = str(name)
    line = visible_text(text)
    if len(line) <= width:
        return line
    tail = "…" + text_digest(text, 6)
    return line[: width - len(tail)] + tail


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def _figure(path: str | os.PathLike, *args: Any, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
    """A figure and its axes (``plt.subplots(*args, **kwargs)``) under :data:`LITERAL_TEXT`, saved as a PNG to
    ``path`` when the block ends and closed whatever happens."""
    import matplotlib

    plt = _pyplot()
    with matplotlib.rc_context(LITERAL_TEXT):
        fig, axes = plt.subplots(*args, **kwargs)
        try:
            yield fig, axes
            fig.savefig(path, dpi=120)
        finally:
            plt.close(fig)


def _error_lengths(centre, low, high) -> np.ndarray:
    """Error-bar lengths ``(2, n)`` below and above ``centre``: none on an infinite end, clipped at 0 because
    matplotlib refuses a negative one, which an end rounding put an ulp past its estimate would be."""
    centre = np.asarray(centre, dtype=np.float64)
    low = np.where(np.isfinite(low), low, centre)
    high = np.where(np.isfinite(high), high, centre)
    return np.clip(np.vstack([centre - low, high - centre]), 0.0, None)


def forest_plot(report: ComparisonReport, path: str | os.PathLike) -> None:
    """Save one row per hypothesis: the difference (candidate - baseline) and its interval.

    Filled markers are significant after adjustment; orange diamonds are rows whose interval and adjusted p-value part
    ways (:func:`~mlflow_recsys.report._rows.interval_disagrees`), the legend saying why; the dashed line is no
    difference; against a margin, a red tick on each row marks -margin (and +margin for equivalence), and the interval
    is the ``1 - 2 alpha`` one. Names are drawn literally (see the module notes). Writes a PNG to ``path``.

    Raises
    ------
    OSError
        If ``path`` cannot be written.
    """
    frame = report.to_frame()
    labels = [
        f"{plot_label(r.candidate)} vs {plot_label(r.baseline)}\n{plot_label(r.metric)}" for r in frame.itertuples()
    ]
    y = np.arange(len(frame))[::-1]
    with _figure(path, figsize=(8, 0.6 * len(frame) + 2.2)) as (fig, ax):
        xerr = _error_lengths(frame["difference"], frame["ci_low"], frame["ci_high"])
        ax.errorbar(frame["difference"], y, xerr=xerr, fmt="none", ecolor="0.3", capsize=3)
        open_low, open_high = ~np.isfinite(frame["ci_low"]), ~np.isfinite(frame["ci_high"])
        if open_low.any() or open_high.any():
            # A one-sided interval runs on to infinity: draw it to the edge, ending in an arrow.
            left, right = ax.get_xlim()
            for end, open_side, marker in ((right, open_high, ">"), (left, open_low, "<")):
                for d, yy in zip(frame["difference"][open_side], y[open_side], strict=True):
                    ax.plot([d, end], [yy, yy], color="0.3", linewidth=1)
                    ax.plot([end], [yy], marker=marker, color="0.3", markersize=5, clip_on=False)
            ax.set_xlim(left, right)
        significant = frame["significant"].to_numpy(dtype=bool)
        disagrees = np.array([interval_disagrees(c) for c in report.comparisons], dtype=bool)
        styles = [
            (significant & ~disagrees, {"color": "C0", "label": "significant (adjusted)"}),
            (~significant & ~disagrees, {"facecolor": "white", "edgecolor": "C0", "label": "not significant"}),
        ]
        # An interval and a p-value that part ways: orange diamonds, the legend saying why in the report's words.
        for side, face in ((~significant, "white"), (significant, "C1")):
            rows = [c for c, shown in zip(report.comparisons, disagrees & side, strict=True) if shown]
            if rows:
                why = disagreement_words(rows[0], report.correction)
                label = ("" if rows[0].significant else "not significant: ") + "\n".join(textwrap.wrap(why, 60))
                styles.append((disagrees & side, {"facecolor": face, "edgecolor": "C1", "marker": "D", "label": label}))
        for shown, style in styles:
            if shown.any():
                ax.scatter(frame["difference"][shown], y[shown], zorder=3, **style)
        ax.axvline(0.0, color="0.5", linestyle="--", linewidth=1)
        _margin_marks(ax, frame, y)
        ax.set_yticks(y, labels, fontsize=8)
        level = interval_level(report.comparisons[0])
        sided = "one-sided " if (open_low | open_high).any() else ""
        simultaneous = "simultaneous " if report.comparisons[0].interval_method == "max-T" else ""
        ax.set_xlabel(
            f"candidate - baseline, with its {format_level(level)} {sided}{simultaneous}paired bootstrap interval",
            fontsize=9,
        )
        # Under the axes, where a long reason cannot cover a row.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False)
        fig.tight_layout()


def _margin_marks(ax, frame, y: np.ndarray) -> None:
    """Each row's margin as a short red tick at -margin (and +margin for equivalence): what its interval must clear."""
    for r, yy in zip(frame.itertuples(), y, strict=True):
        if r.hypothesis == "superiority":
            continue
        ends = (-r.margin, r.margin) if r.hypothesis == "equivalence" else (-r.margin,)
        for end in ends:
            ax.plot([end, end], [yy - 0.3, yy + 0.3], color="C3", linewidth=1.5)
    if (frame["hypothesis"] != "superiority").any():
        ax.plot([], [], color="C3", linewidth=1.5, label="margin")


def seed_spread_plot(per_seed: pd.DataFrame, path: str | os.PathLike) -> None:
    """Save the per-seed differences with each seed's user interval, one panel per metric.

    ``per_seed`` is :meth:`SeedSpread.per_seed_frame` (optionally with a ``comparison`` column when several candidates
    are drawn). Names and seeds are drawn literally (see the module notes). Writes a PNG to ``path``.

    Raises
    ------
    OSError
        If ``path`` cannot be written.
    """
    if "comparison" not in per_seed.columns:
        per_seed = per_seed.assign(comparison="")
    metrics = list(dict.fromkeys(per_seed["metric"]))
    n_comparisons = per_seed["comparison"].nunique()
    columns = min(n_comparisons, 3)
    legend_rows = -(-n_comparisons // columns) if n_comparisons > 1 or per_seed["comparison"].iloc[0] else 0
    legend_height = 0.22 * legend_rows + (0.2 if legend_rows else 0)  # inches under the panels
    height = 3.2 + legend_height
    with _figure(path, 1, len(metrics), figsize=(3.2 * len(metrics), height), squeeze=False) as (fig, axes):
        # Each comparison's points sit side by side within one seed's slot (at most 0.6 wide).
        step = min(0.15, 0.6 / max(n_comparisons - 1, 1))
        for ax, metric in zip(axes[0], metrics, strict=True):
            rows = per_seed[per_seed["metric"] == metric]
            handles, names = [], []
            for k, (name, group) in enumerate(rows.groupby("comparison", sort=False)):
                x = np.arange(len(group)) + step * (k - (n_comparisons - 1) / 2)
                diff = group["difference"].to_numpy()
                yerr = _error_lengths(diff, group["ci_low"].to_numpy(), group["ci_high"].to_numpy())
                handles.append(ax.errorbar(x, diff, yerr=yerr, fmt="o", capsize=3))
                names.append(plot_label(name))
                ax.axhline(diff.mean(), color=f"C{k}", linewidth=1, alpha=0.6)
            seeds = rows.drop_duplicates(["baseline_seed", "candidate_seed"])
            ax.set_xticks(
                np.arange(len(seeds)),
                [
                    plot_label(c if c is not None and c == c else b, 12)
                    for b, c in zip(seeds["baseline_seed"], seeds["candidate_seed"], strict=True)
                ],
                fontsize=8,
            )
            ax.axhline(0.0, color="0.5", linestyle="--", linewidth=1)
            ax.set_title(plot_label(metric), fontsize=9)
            ax.set_xlabel("seed")
        axes[0][0].set_ylabel("difference (candidate - baseline)")
        fig.suptitle("Each seed's difference with its interval over users; solid line: mean over seeds", fontsize=9)
        if legend_rows:
            # Below the panels, never over the data. Handles and labels passed explicitly: matplotlib would skip a
            # name that starts with "_".
            fig.legend(handles, names, fontsize=7, loc="lower center", ncol=columns, frameon=False)
        fig.tight_layout(rect=(0, legend_height / height, 1, 1))


def meta_forest_plot(meta: MetaAnalysis, path: str | os.PathLike, *, title: str = "") -> None:
    """Save the forest plot of a meta-analysis: one row per dataset (its effect, its normal interval, a square sized by
    its random-effects weight), then the pooled effect as a diamond spanning its interval and, with 3 or more
    datasets, the prediction interval as a bar under it. ``title`` (e.g. ``"ELSA vs EASE, ndcg@100"``) heads it.
    Names are drawn literally (see the module notes). Writes a PNG to ``path``.

    Raises
    ------
    OSError
        If ``path`` cannot be written.
    """
    frame = meta.to_frame()
    rows = frame.iloc[:-1]
    y = np.arange(len(rows))[::-1] + 2.0
    with _figure(path, figsize=(7, 0.45 * len(rows) + 2.0)) as (fig, ax):
        ax.errorbar(
            rows["effect"],
            y,
            xerr=_error_lengths(rows["effect"], rows["ci_low"], rows["ci_high"]),
            fmt="none",
            ecolor="0.3",
            capsize=2,
        )
        ax.scatter(rows["effect"], y, marker="s", s=30 + 250 * rows["weight"], color="C0", zorder=3)
        low, high = meta.ci_low, meta.ci_high
        ax.fill([low, meta.effect, high, meta.effect], [0.5, 0.8, 0.5, 0.2], color="C3", zorder=3)
        if np.isfinite(meta.prediction_low):
            ax.plot([meta.prediction_low, meta.prediction_high], [0.0, 0.0], color="C3", linewidth=2)
        ax.axvline(0.0, color="0.5", linestyle="--", linewidth=1)
        pooled = f"pooled (I² {meta.i2:.0%}, τ² {meta.tau2:.2g})"
        ticks = [*y, 0.5] + ([0.0] if np.isfinite(meta.prediction_low) else [])
        labels = [plot_label(d) for d in rows["dataset"]] + [pooled] + ["prediction"] * (len(ticks) - len(y) - 1)
        ax.set_yticks(ticks, labels, fontsize=8)
        unit = "log ratio of means" if meta.scale == "log-ratio" else "difference"
        ax.set_xlabel(f"{unit} (candidate vs reference), {format_level(meta.confidence_level)} intervals", fontsize=9)
        if title:
            ax.set_title(plot_label(title, 80), fontsize=9)
        fig.tight_layout()


def critical_difference_plot(ranks: RankAnalysis, path: str | os.PathLike) -> None:
    """Save a critical-difference diagram (Demšar, 2006): the models on an axis of average rank (1, the best, on the
    left), and a bar under each group of models no two of which differ significantly; with Nemenyi's test, the
    critical difference drawn above the axis. Names are drawn literally (see the module notes). Writes a PNG to
    ``path``.

    Raises
    ------
    OSError
        If ``path`` cannot be written.
    """
    k, half = len(ranks.models), (len(ranks.models) + 1) // 2
    rank = dict(zip(ranks.models, ranks.average_ranks, strict=True))
    first_elbow = -0.5 - 0.2 * len(ranks.groups)
    with _figure(path, figsize=(8, 1.4 + 0.2 * (len(ranks.groups) + 2 * half))) as (fig, ax):
        pad = 0.55 * k  # room for the names beyond the axis
        ax.set_xlim(0.5 - pad, k + 0.5 + pad)
        ax.set_ylim(first_elbow - 0.4 * half, 1.0)
        ax.plot([1, k], [0, 0], color="0.2", linewidth=1)
        for r in range(1, k + 1):
            ax.plot([r, r], [0.0, 0.1], color="0.2", linewidth=1)
            ax.text(r, 0.15, str(r), ha="center", fontsize=8)
        for i, model in enumerate(ranks.models):
            left = i < half
            level = first_elbow - 0.4 * (i if left else k - 1 - i)
            end = 0.6 if left else k + 0.4
            ax.plot([rank[model], rank[model], end], [0.0, level, level], color="0.3", linewidth=0.8)
            ax.text(
                end + (-0.1 if left else 0.1),
                level,
                f"{plot_label(model)} ({rank[model]:.2f})",
                ha="right" if left else "left",
                va="center",
                fontsize=8,
            )
        for j, group in enumerate(ranks.groups):
            y = -0.3 - 0.2 * j
            ax.plot([rank[group[0]] - 0.05, rank[group[-1]] + 0.05], [y, y], color="C3", linewidth=3)
        if np.isfinite(ranks.critical_difference):
            ax.plot([1, 1 + ranks.critical_difference], [0.6, 0.6], color="0.2", linewidth=1.5)
            ax.text(1, 0.7, f"CD {ranks.critical_difference:.2f}", fontsize=8)
        ax.set_axis_off()
        test = "Nemenyi" if ranks.posthoc == "nemenyi" else "Wilcoxon-Holm"
        floor = "" if ranks.conclusive else f"; {len(ranks.datasets)} datasets cannot show any pair different"
        title = f"Average rank over {len(ranks.datasets)} datasets; a bar joins models that do not differ"
        ax.set_title(f"{title} ({test}, alpha {ranks.alpha:g}){floor}", fontsize=8)
        fig.tight_layout()
