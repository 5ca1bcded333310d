"""Command line: ``mlflow-recsys split | train | compare | main (or study) | datasets``.

Thin on purpose: every command calls the same functions a Python user would,
and turns the errors they raise into one clear line instead of a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import warnings

import click

from mlflow_recsys._cli_group import Commands, visible
from mlflow_recsys.data._split_config import SplitConfig
from mlflow_recsys.errors import raise_terminated
from mlflow_recsys.models._registry import MODELS
from mlflow_recsys.models._train_config import TrainConfig
from mlflow_recsys.settings_schema import Setting, click_options, option, settings_of
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.tracking import _tags as tags

__all__ = ["cli"]

_METRICS_HELP = "comma-separated metric keys, e.g. ndcg@100,recall@20"


def _none_if_empty(value: str | None) -> str | None:
    return value if value not in (None, "", "None", "none") else None


def _split_list(value: str | None, option: str) -> list[str]:
    """The items of a comma-separated option; ``""`` is the option left out (``-P metrics=`` of ``mlflow run``)."""
    items = [v.strip() for v in (value or "").split(",") if v.strip()]
    if value and value.strip() and not items:
        raise click.BadParameter(f"expected comma-separated values, found {value!r}", param_hint=option)
    return items


@click.group(cls=Commands)
@click.version_option(package_name="mlflow-recsys")
@click.option("--debug", is_flag=True, help="show the full traceback of an error, not only its one-line message")
@click.pass_context
def cli(ctx, debug):
    """Train, evaluate and statistically compare top-N recommenders as MLflow runs."""
    from mlflow_recsys.tracking._redact import hide_run_links_with_credentials
    from mlflow_recsys.tracking._server_errors import use_cli_defaults

    ctx.obj = {"debug": debug}
    # Bounded waits on a tracking server that stopped answering (MLflow's defaults wait minutes per request).
    use_cli_defaults()
    # A SIGTERM (kill, a scheduler's time limit) unwinds like an error, so the run in progress ends FAILED.
    signal.signal(signal.SIGTERM, raise_terminated)
    # Our progress lines ("comparing 5 runs ...") on stderr; MLflow's own loggers keep their level.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    package_logger = logging.getLogger("mlflow_recsys")
    if not package_logger.handlers:
        package_logger.addHandler(handler)
    package_logger.setLevel(logging.INFO)
    # One progress bar per step is ours; MLflow's per-file download bars only add noise.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # On the command line a warning's source line is click's, which helps nobody: print the message only.
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"{category.__name__}: {visible(message)}\n"
    # MLflow's "View run at <URL>" line would print a tracking URI's password.
    hide_run_links_with_credentials(os.environ.get("MLFLOW_TRACKING_URI", ""))
    # Lets the run context provider (mlflow_recsys.tracking._plugin) tag the runs this command makes.
    os.environ["MLFLOW_RECSYS_COMMAND"] = ctx.invoked_subcommand or ""


@cli.command("datasets")
def _datasets():
    """List the registered datasets with their source, checksum, licence and citation."""
    from mlflow_recsys.data import DATASETS
    from mlflow_recsys.data._datasets import NOT_REGISTERED

    for name, spec in DATASETS.items():
        size = f"{spec.size_bytes:,} bytes" if spec.size_bytes else "size not published"
        click.echo(
            f"{name}: {spec.description}\n  url: {spec.url} ({size})\n  sha256: {spec.sha256}\n"
            f"  licence: {spec.licence}\n  cite: {spec.citation}"
        )
    for name, reason in NOT_REGISTERED.items():
        click.echo(f"{name} (not registered): {reason}")
    click.echo(
        "Your own data: pass a .csv or .parquet path as --dataset; name its columns with --user-col, "
        "--item-col, --value-col (none: implicit feedback) and --timestamp-col."
    )


def _min_rating(ctx, param, value):
    """``auto`` (the default, also for ''): 4 for a log with ratings, none for implicit feedback (``--value-col
    none``); ``none`` keeps every row."""
    if value is None or value.strip().lower() in ("auto", ""):
        return "auto"
    if value.strip().lower() == "none":
        return None
    try:
        number = float(value)
    except ValueError:
        raise click.BadParameter(f"expected a number or nothing, found {value!r}") from None
    if not math.isfinite(number):  # "1e400" reads as inf: say what was typed
        raise click.BadParameter(f"expected a finite number or nothing, found {value!r}")
    return number


def _column_options(**helps: str):
    """``--<role>-col`` (also ``--<role>_col``, as ``mlflow run -P`` passes it) for each role of a user's log."""

    def add(func):
        for role, help in reversed(helps.items()):
            func = click.option(
                f"--{role}-col", f"--{role}_col", f"{role}_col", default=None, help=f"your log: {help}"
            )(func)
        return func

    return add


_COLUMN_ROLES = ("user", "item", "value", "timestamp")


def _column(value: str | None, may_be_absent: bool) -> str | None | bool:
    """A column option: False when not given (the default applies), None for ``none`` where that is allowed."""
    if not value:
        return False
    return None if may_be_absent and value.lower() == "none" else value


@cli.command("split")
@click.option(
    "--dataset",
    default="movielens-100k",
    show_default=True,
    help="registered dataset name, or a .csv/.parquet interaction log (see --user-col ... --timestamp-col)",
)
@_column_options(
    user="the user id column [default: user]",
    item="the item id column [default: item]",
    value="the rating or count column, or 'none' for implicit feedback (every row a positive) [default: value]",
    timestamp="the time column (Unix seconds or ISO 8601), or 'none' to ignore one [default: timestamp, if present]",
)
@click_options(SplitConfig, ["split_mode", "seed", "eval_draws", "eval_holdout_frac", "test_frac", "val_frac"])
@click.option(
    "--min-rating",
    "--min_rating",
    "min_rating",
    default="auto",
    show_default=True,
    callback=_min_rating,
    help="lowest value kept as a positive; 'none' keeps every row; auto: 4, or none with --value-col none",
)
@click_options(SplitConfig, ["min_user_interactions", "min_item_interactions"])
@click.option("--data-dir", default=None, help="download cache (default: per-user cache folder)")
def _split(dataset, data_dir, **settings):
    """Build a split and log it as a split run (artifact checkpoint.zip)."""
    from mlflow_recsys.tracking._training import run_split

    given = {role: _column(settings.pop(f"{role}_col"), role in ("value", "timestamp")) for role in _COLUMN_ROLES}
    columns = {role: name for role, name in given.items() if name is not False}
    if settings["min_rating"] == "auto":
        settings["min_rating"] = None if "value" in columns and columns["value"] is None else 4.0
    run_id = run_split(dataset, SplitConfig(**settings), columns=columns or None, data_dir=_none_if_empty(data_dir))
    click.echo(f"split run {run_id}: checkpoint runs:/{run_id}/checkpoint.zip")
    import mlflow

    from mlflow_recsys.data import StepCount

    for step in mlflow.artifacts.load_dict(f"runs:/{run_id}/manifest.json")["preprocessing"]:
        click.echo(f"  {StepCount(**step).describe()}")
    m = {k: int(v) for k, v in mlflow.get_run(run_id).data.metrics.items()}
    click.echo(
        f"  {m['n_train_users']:,} training users x {m['n_items']:,} items; test: {m['n_test_rows']:,} rows "
        f"({m['n_test_users_dropped']:,} users dropped); validation: {m['n_val_rows']:,} rows "
        f"({m['n_val_users_dropped']:,} dropped)"
    )


def _hyperparameter_options(func):
    """An option for each hyper-parameter some model's ``train`` step takes, from its config class's declaration.
    None means "not given": the model's own default applies and nothing is logged for it."""
    declared: dict[str, tuple[Setting, list[str]]] = {}
    for spec in MODELS.values():
        fields = settings_of(spec.config_class) if spec.config_class else {}
        for name in spec.hyperparameters:
            default, setting = fields[name]
            default = spec.train_defaults.get(name, default)
            said = "" if default is None else f", default {setting.text(default)}"
            declared.setdefault(name, (setting, []))[1].append(f"{spec.name}{said}")
    for name, (setting, uses) in reversed(declared.items()):
        func = option(name, None, setting, help=f"{setting.help} ({'; '.join(uses)})")(func)
    return func


@cli.command("train")
@click.option("--checkpoint", required=True, help="checkpoint zip path or artifact URI (runs:/<id>/checkpoint.zip)")
@click.option("--model", required=True, type=click.Choice(list(MODELS)))
@_hyperparameter_options
@click.option("--metrics", default=None, help=_METRICS_HELP + " (default: the standard set)")
@click_options(TrainConfig, ["register"])
def _train(checkpoint, model, metrics, register, **hyperparameters):
    """Fit one model, evaluate it on the test users and log a train run.

    Only the model's own hyper-parameters are taken (EASE: --l2, --device; ELSA: --seed, --latent-dim, --batch-size,
    --epochs, --lr, --weight-decay, --device, --matmul-precision, --patience; Popularity: none).
    """
    from mlflow_recsys.models._train_config import DEFAULT_METRICS, foreign_hyperparameters
    from mlflow_recsys.tracking._training import run_train

    # "" is an option left out, as everywhere in the CLI (`mlflow run -P name=` passes it so).
    given = {k: v for k, v in hyperparameters.items() if v is not None and v != ""}
    # A run logs the hyper-parameters its model takes and no others, so the command refuses the rest.
    problem = foreign_hyperparameters(MODELS[model], given)
    if problem:
        raise click.UsageError(problem)
    keys = _split_list(metrics, "--metrics") or DEFAULT_METRICS
    run_id = run_train(checkpoint, TrainConfig(model, given, metrics=tuple(keys), register=_none_if_empty(register)))
    click.echo(f"train run {run_id} ({model})")
    import mlflow

    from mlflow_recsys.tracking._naming import mlflow_metric_name

    logged = mlflow.get_run(run_id).data.metrics
    shown = [f"{key} {logged[name]:.4f}" for key in keys if (name := mlflow_metric_name(key)) in logged]
    click.echo("  test " + ", ".join(shown))


def _key_values(ctx, param, values) -> dict[str, str]:
    out = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, found {text!r}")
        if key in out:
            raise click.BadParameter(f"expected each KEY once, found {key!r} twice")
        out[key] = value
    return out


@cli.command("import-run")
@click.option("--checkpoint", required=True, help="the split's checkpoint (runs:/<split run>/checkpoint.zip)")
@click.option("--recommendations", required=True, help="lists: a .parquet, .csv or TREC run file")
@click.option("--model", required=True, help="name of the model the lists came from (the recsys.model tag)")
@click.option("--seed", default=None, help="the training seed behind the lists [default: none]")
@click.option("--param", "params", multiple=True, callback=_key_values, help="KEY=VALUE hyper-parameter (repeatable)")
@click.option("--user-col", default="user", show_default=True, help="the user id column")
@click.option("--item-col", default="item", show_default=True, help="the item id column")
@click.option("--rank-col", default=None, help="the rank column (1 best) [default: rank, if present]")
@click.option("--score-col", default=None, help="the score column (higher first) [default: score, if no rank]")
@click.option(
    "--format", "file_format", default="auto", show_default=True, type=click.Choice(["auto", "parquet", "csv", "trec"])
)
@click.option("--history", default="remove", show_default=True, type=click.Choice(["remove", "strict"]))
@click.option("--missing", default="zero", show_default=True, type=click.Choice(["zero", "strict"]))
@click.option("--metrics", default=None, help=_METRICS_HELP + " (default: the train step's set)")
def _import_run(recommendations, metrics, file_format, **options):
    """Score another framework's recommendation lists on a split's test users; log them as a train-role run."""
    import mlflow

    from mlflow_recsys.tracking._imports import log_recommendations

    options["seed"] = options["seed"] or None
    keys = _split_list(metrics, "--metrics") or None
    run_id = log_recommendations(recommendations, metrics=keys, format=file_format, **options)
    click.echo(f"imported run {run_id} ({options['model']})")
    logged = mlflow.get_run(run_id).data.metrics
    for name in ("n_history_items_removed", "n_missing_users", "n_short_lists"):
        click.echo(f"  {name} {int(logged[name])}")


@cli.command("export-split")
@click.option("--checkpoint", required=True, help="the split's checkpoint (runs:/<split run>/checkpoint.zip or a path)")
@click.option("--out", required=True, help="a new folder for the files")
@click.option("--format", "file_format", default="parquet", show_default=True, type=click.Choice(["parquet", "csv"]))
def _export_split_command(checkpoint, out, file_format):
    """Write a split as files other frameworks read (train, test and validation fold-in and targets, the
    catalogue, split.json), with the dataset's own ids."""
    from mlflow_recsys.tracking._interchange import export_split

    folder = export_split(checkpoint, out, format=file_format)
    click.echo(f"exported the split to {folder}")
    for path in sorted(folder.iterdir()):
        click.echo(f"  {path.name}")


#: The columns ``comparisons --format table`` shows; csv and json give every column of search_comparisons.
_COMPARISON_TABLE_COLUMNS = (
    *("start_time", "run_id", "dataset", "analysis_role", "metric", "candidate", "baseline", "difference"),
    *("ci_low", "ci_high", "adjusted_p_value", "direction", "wins", "ties", "losses"),
)


@cli.command("comparisons")
@click.option("--experiment", "experiments", multiple=True, required=True, help="experiment name or id (repeatable)")
@click.option("--filter", "filter_string", default=None, help="MLflow search filter for the comparison runs")
@click.option(
    "--format",
    "output_format",
    default="table",
    show_default=True,
    type=click.Choice(["table", "csv", "json"]),
    help="table: the key columns; csv and json: every column",
)
def _comparisons(experiments, filter_string, output_format):
    """Every hypothesis of the experiments' FINISHED comparison runs, one row each, oldest run first (the frame
    mlflow_recsys.search_comparisons returns)."""
    from mlflow_recsys.report._escaping import csv_safe_frame
    from mlflow_recsys.tracking._queries import search_comparisons

    frame = search_comparisons(list(experiments), _none_if_empty(filter_string))
    if output_format == "csv":
        click.echo(csv_safe_frame(frame).to_csv(index=False), nl=False)
    elif output_format == "json":
        # json.dumps, not DataFrame.to_json: that rounds floats to 10 digits, where repr keeps every bit.
        frame = frame.assign(start_time=frame["start_time"].map(lambda t: t.isoformat()))
        records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
        click.echo(json.dumps(records, indent=1, allow_nan=False, default=int))
    elif frame.empty:
        click.echo("no FINISHED comparison runs match")
    else:
        shown = frame[list(_COMPARISON_TABLE_COLUMNS)].copy()
        shown["start_time"] = shown["start_time"].dt.strftime("%Y-%m-%d %H:%M")
        for column in ("dataset", "metric", "candidate", "baseline"):
            shown[column] = shown[column].map(lambda v: v if v is None else visible(v))
        click.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        runs = frame["run_id"].nunique()
        click.echo(
            f"{len(frame)} {'hypothesis' if len(frame) == 1 else 'hypotheses'} of {runs} comparison "
            f"{'run' if runs == 1 else 'runs'}; --format csv or json gives every column"
        )


@cli.command("compare")
@click.argument("run_ids", nargs=-1)
@click.option(
    "--run-ids", "--run_ids", "run_ids_csv", default=None, help="comma-separated run ids (alternative to arguments)"
)
@click.option("--compare-url", "--compare_url", "compare_url", default=None, help="a pasted MLflow UI compare-runs URL")
@click.option("--experiment", default=None, help="experiment name or id to select runs from")
@click.option("--filter", "filter_string", default=None, help="MLflow filter string, with --experiment")
@click.option(
    "--output-experiment",
    "--output_experiment",
    "output_experiment",
    default=None,
    help="experiment name or id, made if new [default: the sources']",
)
@click.option(
    "--model-tag",
    "--model_tag",
    "model_tag",
    default=tags.MODEL,
    show_default=True,
    help="run tag that names the model",
)
@click_options(ComparisonSettings)
def _compare(run_ids, run_ids_csv, model_tag, **options):
    """Compare training runs and log the report as a comparison run."""
    from mlflow_recsys.tracking._comparison import compare_runs

    ids = list(run_ids) + _split_list(run_ids_csv, "--run-ids")
    where = ("compare_url", "experiment", "filter_string", "output_experiment")
    selection = {name: _none_if_empty(options.pop(name)) for name in where}
    settings = ComparisonSettings(**options)
    outcome = compare_runs(
        run_ids=ids or None, settings=settings, model_tag=_none_if_empty(model_tag) or tags.MODEL, **selection
    )
    from mlflow_recsys.report._console import comparison_printout

    click.echo(comparison_printout(outcome, settings.primary, settings.primary_analysis))


#: The compared metrics of the one-dataset study: accuracy, then what the lists expose (item-side, per user).
_STUDY_METRICS = ("ndcg@100", "calibrated_recall@20", "recall@20", "mrr@20", "arp@20", "aplt@20", "novelty@20")
#: The exploratory slices of the one-dataset study's comparison.
_STUDY_SLICES = ("history:4", "target_popularity")
#: The global metrics of the one-dataset study's comparison, at the item-side metrics' cutoff.
_STUDY_GLOBAL = ("coverage@20", "gini@20")


def _study_options(func):
    """The options of the one-dataset study, each made from the declaration of the setting it sets (its model's
    config, the split's, the comparison's, the study file's top level) with the study's own default where it has
    one."""
    from mlflow_recsys.tracking._study_settings import StudySettings

    chosen = [("split_seed", settings_of(SplitConfig)["seed"], "the split's seed")]
    for model, names in (("EASE", ("l2",)), ("ELSA", ("latent_dim", "batch_size", "epochs", "lr", "device"))):
        spec, fields = MODELS[model], settings_of(MODELS[model].config_class)
        for name in names:
            default, declared = fields[name]
            chosen.append((name, (spec.train_defaults.get(name, default), declared), f"{model}: {declared.help}"))
    compared = settings_of(ComparisonSettings)
    chosen += [
        ("metrics", (_STUDY_METRICS, compared["metrics"][1]), "metric keys compared"),
        ("primary", ("ndcg@100", compared["primary"][1]), None),
        ("n_resamples", compared["n_resamples"], None),
        ("slices", (_STUDY_SLICES, compared["slices"][1]), None),
        ("global_metrics", (_STUDY_GLOBAL, compared["global_metrics"][1]), None),
        *(
            (name, declared, None)
            for name, declared in settings_of(StudySettings).items()
            if "executor" in name or "ray" in name
        ),
    ]
    for name, (default, declared), help in reversed(chosen):
        func = option(name, default, declared, help=help)(func)
    return func


@cli.command("main")
@click.argument("study_file", required=False, default=None)
@click.option(
    "--dry-run", is_flag=True, help="print what the study would split, train, reuse and compare; make nothing"
)
@click.option(
    "--dataset", default="movielens-100k", show_default=True, help="a registered dataset, or a .csv/.parquet log"
)
@click.option("--seeds", default="0,1,2", show_default=True, help="ELSA training seeds, comma-separated")
@_study_options
@click.option("--project-uri", default=".", show_default=True, help="the MLflow project holding the entry points")
@click.pass_context
def _main(ctx, study_file, dry_run, project_uri, **flags):
    """A study: the datasets, models, grids, seeds and comparison of STUDY_FILE (TOML), or, without one, the
    one-dataset study the options describe (split, EASE, ELSA under each seed, compare); each step an MLflow run
    under the study run (also `study`).

    A training that fails leaves the others running: the study run ends FAILED and names it. Rerun the study to
    train only what did not finish: trainings that finished in an earlier study on the same split are reused.
    """
    from mlflow_recsys.tracking._executors import make_executor
    from mlflow_recsys.tracking._study import plan_text, run_study
    from mlflow_recsys.tracking._study_file import read_study

    study_file = _none_if_empty(study_file)
    if study_file is not None:
        # Every option but these describes the one-dataset study, which the file replaces.
        own = ("study_file", "dry_run", "project_uri")
        given = [p.name for p in ctx.command.params if p.name not in own]
        changed = [n for n in given if ctx.get_parameter_source(n) != click.core.ParameterSource.DEFAULT]
        if changed:
            option = "--" + changed[0].replace("_", "-")
            raise click.UsageError(f"{option}: a study file declares the whole study; give the file or the options")
        plan = read_study(study_file)
    else:
        plan = _shorthand(flags)
    if dry_run:
        click.echo("dry run: the plan below, and nothing made\n\n" + plan_text(plan))
        return
    try:
        address = plan.settings.ray_address
        runner = make_executor(plan.settings.executor, ray_address=address, project_uri=project_uri)
    except ImportError as exc:  # Ray missing: the message says how to install it
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    run_study(plan, executor=runner, project_uri=project_uri, echo=click.echo, study_file=study_file)


def _shorthand(flags: dict):
    """The plan of the one-dataset options."""
    from mlflow_recsys.tracking._study_file import shorthand_plan

    try:
        seeds = [int(v) for v in _split_list(flags["seeds"], "--seeds")]
    except ValueError:
        found = flags["seeds"]
        raise click.BadParameter(f"expected comma-separated integers, found {found!r}", param_hint="--seeds") from None
    elsa = {k: flags[k] for k in ("latent_dim", "batch_size", "epochs", "lr")}
    from mlflow_recsys.metrics import parse_metric_keys

    try:  # before the primary metric is looked for among them
        parse_metric_keys(list(flags["metrics"] or ()))
    except ValueError as exc:
        raise ValueError(f"metrics: {str(exc).removeprefix('key: ')}") from None
    comparison = ComparisonSettings(
        reference="EASE",
        metrics=flags["metrics"],
        primary=flags["primary"],
        n_resamples=flags["n_resamples"],
        slices=flags["slices"],
        global_metrics=flags["global_metrics"],
    )
    return shorthand_plan(
        dataset=flags["dataset"],
        split_seed=flags["split_seed"],
        seeds=seeds,
        ease={"l2": flags["l2"]},
        elsa={**elsa, "device": flags["device"]},
        comparison=comparison,
        executor=flags["executor"],
        ray_address=flags["ray_address"],
    )


cli.add_command(_main, name="study")


class _DecisionCommand(click.Command):
    """A command whose exit code is its answer: any error, click's own refusals included, exits 3 (INVALID)."""

    error_exit_code, error_word = 3, "INVALID"


@cli.command("gate", cls=_DecisionCommand)
@click.option(
    "--candidate", required=True, help="the model proposed: models:/NAME/VERSION, models:/NAME@ALIAS, runs:/<id>, a run"
)
@click.option(
    "--incumbent", required=True, help="the model in production: models:/NAME@champion, models:/NAME/VERSION, a run"
)
@click.option("--primary", required=True, help="the metric the decision rests on, e.g. ndcg@100")
@click.option("--margin", type=float, default=None, help="the primary metric's non-inferiority margin (metric units)")
@click.option("--relative", is_flag=True, help="every margin is a fraction of the incumbent's mean (ratio of means)")
@click.option(
    "--guardrail", "guardrails", multiple=True, metavar="METRIC:MARGIN", help="a guardrail and its margin (repeatable)"
)
@click.option(
    "--hypothesis",
    type=click.Choice(["non-inferiority", "superiority"]),
    default="non-inferiority",
    show_default=True,
    help="what the primary metric must show (superiority: two-sided, no margin)",
)
@option(
    "confidence_level",
    *settings_of(ComparisonSettings)["confidence_level"],
    help="1 - alpha, the one-sided level of each non-inferiority test (its interval is the 1 - 2 alpha one)",
)
@click_options(ComparisonSettings, ["n_resamples", "random_state"])
@click.option(
    "--test-method",
    type=click.Choice(["randomization", "bootstrap", "t"]),
    default="randomization",
    show_default=True,
    help="the paired test of the mean difference",
)
@click.option("--promote", is_flag=True, help="on PROMOTE, move the alias to the candidate's version (else a dry run)")
@click.option("--alias", default="champion", show_default=True, help="the alias marking the model in production")
def _gate(candidate, incumbent, promote, **rule):
    """Decide whether the candidate may replace the incumbent: one line, and the exit code 0 PROMOTE, 1 HOLD,
    2 REJECT, 3 INVALID (not comparable, or bad input; no decision)."""
    from mlflow_recsys.stats._gate_decision import GateRule, Guardrail
    from mlflow_recsys.tracking._gate import run_gate

    alias, guardrails = rule.pop("alias"), tuple(Guardrail.parse(g) for g in rule.pop("guardrails"))
    outcome = run_gate(candidate, incumbent, GateRule(guardrails=guardrails, **rule), promote=promote, alias=alias)
    for decided in (signal.SIGINT, signal.SIGTERM):  # the decision is recorded: the exit code is its, not a signal's
        signal.signal(decided, signal.SIG_IGN)
    promoted = outcome.promoted
    moved = f"; {promoted.model}@{promoted.alias} -> version {promoted.candidate_version}" if promoted else ""
    with contextlib.suppress(OSError):  # an unwritable stdout: the decision stands, and its audit run holds the line
        click.echo(f"{outcome.line}{moved} (audit run {outcome.audit_run_id})")
    raise SystemExit(outcome.exit_code)


if __name__ == "__main__":  # `python -m mlflow_recsys.cli` (the MLproject commands), after every command is defined
    cli()
