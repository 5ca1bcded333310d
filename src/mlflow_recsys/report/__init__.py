"""What people read of a comparison: text, markdown, HTML, LaTeX and plots of a ComparisonReport.

The statistics (:mod:`mlflow_recsys.stats`) compute; this package only formats what they computed. Nothing in ``stats``
imports it at module level: ``ComparisonReport.to_markdown()``, ``to_latex()``, ``str(report)``, ``summary()``,
``methods_text()`` and ``results_text()`` call these functions when used.

- :mod:`~mlflow_recsys.report._escaping`: names and metric keys written literally in markdown, LaTeX, terminals, CSV.
- :mod:`~mlflow_recsys.report._text`: the methods paragraph, result sentences, markdown and fixed-width tables.
- :mod:`~mlflow_recsys.report._effect_words`: the words on effect sizes, the sign test and the precision of p-values.
- :mod:`~mlflow_recsys.report._latex`: the booktabs table for papers.
- :mod:`~mlflow_recsys.report._wide`: ranx's wide table, one row per model and one column per metric.
- :mod:`~mlflow_recsys.report._html`: the self-contained ``report.html`` page.
- :mod:`~mlflow_recsys.report._plots`: the forest plot and the per-seed plot (matplotlib, imported when drawing).
- :mod:`~mlflow_recsys.report._citations`: BibTeX of the methods and models.
- :mod:`~mlflow_recsys.report._gate`: the launch gate's decision line and its audit note.
"""

from mlflow_recsys.report._citations import references_bibtex
from mlflow_recsys.report._escaping import csv_safe_frame, escape_latex, escape_markdown, visible_text
from mlflow_recsys.report._gate import gate_line, gate_markdown
from mlflow_recsys.report._html import report_html
from mlflow_recsys.report._latex import report_latex, significance_marker
from mlflow_recsys.report._plots import critical_difference_plot, forest_plot, meta_forest_plot, seed_spread_plot
from mlflow_recsys.report._text import methods_text, report_markdown, report_string, report_summary, results_text
from mlflow_recsys.report._wide import wide_latex, wide_markdown, wide_table

__all__ = [
    "critical_difference_plot",
    "csv_safe_frame",
    "escape_latex",
    "escape_markdown",
    "forest_plot",
    "gate_line",
    "gate_markdown",
    "meta_forest_plot",
    "methods_text",
    "references_bibtex",
    "report_html",
    "report_latex",
    "report_markdown",
    "report_string",
    "report_summary",
    "results_text",
    "seed_spread_plot",
    "significance_marker",
    "visible_text",
    "wide_latex",
    "wide_markdown",
    "wide_table",
]
