"""Figures of a comparison: a forest plot of the differences and the per-seed differences.

matplotlib is imported on first use, with the non-interactive Agg backend, so
plots render on machines without a display.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats.comparison import ComparisonReport


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def forest_plot(report: "ComparisonReport", path: str | os.PathLike) -> None:
    """Save one row per hypothesis: the difference (candidate - baseline) and its interval.

    Filled markers are significant after adjustment; the dashed line is no difference.
    Writes a PNG to ``path``.
    """
    plt = _pyplot()
    frame = report.to_frame()
    labels = [f"{r.candidate} vs {r.baseline}\n{r.metric}" for r in frame.itertuples()]
    y = np.arange(len(frame))[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(frame) + 1.2))
    low = np.where(np.isfinite(frame["ci_low"]), frame["ci_low"], frame["difference"])
    high = np.where(np.isfinite(frame["ci_high"]), frame["ci_high"], frame["difference"])
    ax.errorbar(frame["difference"], y, xerr=[frame["difference"] - low, high - frame["difference"]], fmt="none",
                ecolor="0.3", capsize=3)
    significant = frame["significant"].to_numpy(dtype=bool)
    if significant.any():
        ax.scatter(frame["difference"][significant], y[significant], color="C0", zorder=3,
                   label="significant (adjusted)")
    if (~significant).any():
        ax.scatter(frame["difference"][~significant], y[~significant], facecolor="white", edgecolor="C0",
                   zorder=3, label="not significant")
    ax.axvline(0.0, color="0.5", linestyle="--", linewidth=1)
    ax.set_yticks(y, labels, fontsize=8)
    level = frame["confidence_level"].iloc[0]
    ax.set_xlabel(f"difference (candidate - baseline), {level:.0%} paired bootstrap interval")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def seed_spread_plot(per_seed: pd.DataFrame, path: str | os.PathLike) -> None:
    """Save the per-seed differences with each seed's user interval, one panel per metric.

    ``per_seed`` is :meth:`SeedSpread.per_seed_frame` (optionally with a
    ``comparison`` column when several candidates are drawn). Writes a PNG.
    """
    plt = _pyplot()
    if "comparison" not in per_seed.columns:
        per_seed = per_seed.assign(comparison="")
    metrics = list(dict.fromkeys(per_seed["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        rows = per_seed[per_seed["metric"] == metric]
        for k, (name, group) in enumerate(rows.groupby("comparison", sort=False)):
            x = np.arange(len(group)) + 0.15 * k
            diff = group["difference"].to_numpy()
            ax.errorbar(x, diff, yerr=[diff - group["ci_low"].to_numpy(), group["ci_high"].to_numpy() - diff],
                        fmt="o", capsize=3, label=name or None)
            ax.axhline(diff.mean(), color=f"C{k}", linewidth=1, alpha=0.6)
        seeds = rows.drop_duplicates(["baseline_seed", "candidate_seed"])
        ax.set_xticks(np.arange(len(seeds)),
                      [str(c if c is not None and c == c else b) for b, c in
                       zip(seeds["baseline_seed"], seeds["candidate_seed"])], fontsize=8)
        ax.axhline(0.0, color="0.5", linestyle="--", linewidth=1)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("seed")
    axes[0][0].set_ylabel("difference (candidate - baseline)")
    fig.suptitle("Each seed's difference with its interval over users; solid line: mean over seeds", fontsize=9)
    if per_seed["comparison"].nunique() > 1 or per_seed["comparison"].iloc[0]:
        axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
