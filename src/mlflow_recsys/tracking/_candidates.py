"""Which runs a comparison compares and as what: candidates grouped by model, configuration and seed, the
representative seed of each, and the metric keys every run scored."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from mlflow.entities import Run

from mlflow_recsys._digests import shorten
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._comparison import _pairs
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.stats._warnings import MixedDevicesWarning, warn
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._artifacts import EvaluationArtifacts
from mlflow_recsys.tracking._limits import duplicates, fit_key
from mlflow_recsys.tracking._naming import comparison_metric_name, logged_metric_keys, pair_label
from mlflow_recsys.tracking._runs import RunSelectionError


@dataclass(frozen=True)
class CandidatePlan:
    """What the run metadata decided: models, seeds, metrics, pairs and the MLflow metric names."""

    groups: dict[str, dict[str, str]]  # candidate -> seed tag -> run id
    representative_seeds: dict[str, str]  # candidate -> seed tag of the run in the paired report
    models: list[str]  # candidates in report order: the reference first, then by model and configuration
    metric_keys: list[str] | None  # None: the per-user artifacts decide (the runs logged no aggregates)
    pairs: list[tuple[str, str]]  # (baseline, candidate) of the paired report
    seed_pairs: list[tuple[str, str]]  # pairs that get a seed-spread table
    reference: str | None


def plan_candidates(runs: list[Run], settings: ComparisonSettings, model_tag: str) -> CandidatePlan:
    """Check everything the runs' tags and logged metrics show; nothing here reads an artifact."""
    reference, primary = settings.reference, settings.primary
    # What was evaluated comes first: runs of two splits are the mistake to name, not their repeated seeds.
    for label, tag in ((_SPLIT, tags.SPLIT_DIGEST), (_TARGETS, tags.TARGETS_FINGERPRINT)):
        _check_same(label, {r.info.run_id: r.data.tags[tag] for r in runs if r.data.tags.get(tag)})
    groups, configured = _group(runs, model_tag)
    _warn_on_mixed_devices(runs, groups)
    if len(groups) < 2:
        raise RunSelectionError(f"runs: expected at least two models to compare, found only {list(groups)}")
    if reference in configured:
        raise RunSelectionError(
            f"reference: {reference} is {len(configured[reference])} candidates here, one per configuration, "
            f"so name one of {configured[reference]}",
            hint=f"e.g. --reference {shlex.quote(configured[reference][0])}",
        )
    if reference is not None and reference not in groups:
        raise RunSelectionError(f"reference: expected one of the compared models {list(groups)}, found {reference!r}")
    wanted = settings.representative_seed
    representative_seeds = {m: _representative_seed(m, seeds, wanted) for m, seeds in groups.items()}
    if wanted is not None and not any(wanted in seeds for seeds in groups.values()):
        raise RunSelectionError(
            f"representative_seed: expected a seed of a seeded model, found {wanted!r}; seeds: "
            + "; ".join(f"{m}: {sorted(s, key=tags.seed_order)}" for m, s in groups.items())
        )
    metric_keys = _metadata_metric_keys(runs, settings.metrics, primary)
    models = list(groups)
    if reference is not None:
        models = [reference] + [m for m in models if m != reference]
    pairs = _pairs(models, reference)  # ComparisonSettings has refused a one-sided alternative without a reference
    seed_pairs = [(b, c) for b, c in pairs if len(groups[b]) > 1 or len(groups[c]) > 1]
    # Names collide or not whatever the metrics are, so the check runs now even when only the artifacts
    # will tell which metrics the runs share.
    pair_metric_names(pairs, seed_pairs, metric_keys or ["ndcg@100"])
    return CandidatePlan(
        groups=groups,
        representative_seeds=representative_seeds,
        models=models,
        metric_keys=metric_keys,
        pairs=pairs,
        seed_pairs=seed_pairs,
        reference=reference,
    )


def _warn_on_mixed_devices(runs: list[Run], groups: dict[str, dict[str, str]]) -> None:
    """A :class:`~mlflow_recsys.stats.MixedDevicesWarning` when the runs' ``recsys.device`` tags name more than one
    device type (runs without the tag, imported lists among them, are left out)."""
    device_of = {r.info.run_id: r.data.tags.get(tags.DEVICE, "") for r in runs}
    used = {name: sorted({device_of[i] for i in seeds.values() if device_of[i]}) for name, seeds in groups.items()}
    kinds = sorted({device for devices in used.values() for device in devices})
    if len(kinds) > 1:
        each = "; ".join(f"{name}: {', '.join(devices)}" for name, devices in used.items() if devices)
        warn(
            f"devices: these runs were trained on {' and '.join(kinds)} ({each}). Sums round differently on each, "
            "so differences and the seed spread mix the hardware with the models; train the runs you compare on one "
            "device type",
            MixedDevicesWarning,
        )


def check_paired_seeds(plan: CandidatePlan) -> None:
    """With ``paired_seeds``, two seeded models must have the same seeds, or there is no pairing to make."""
    for base, cand in plan.seed_pairs:
        seeds = [set(plan.groups[m]) for m in (base, cand)]
        if min(map(len, seeds)) > 1 and seeds[0] != seeds[1]:
            order = tags.seed_order
            raise RunSelectionError(
                f"paired_seeds: expected {cand} and {base} to have the same seeds to pair them, found "
                f"{base}: {sorted(seeds[0], key=order)} and {cand}: {sorted(seeds[1], key=order)}; select runs "
                "with matching seeds, or compare without --paired-seeds (independent seeds)"
            )


def _metadata_metric_keys(runs: list[Run], metrics, primary) -> list[str] | None:
    """The metric keys to compare, as far as the runs' logged aggregate metrics tell; None if they cannot (a run
    made by other tools around the per-user artifacts logs none, and is left to the artifact check)."""
    logged = {r.info.run_id: keys for r in runs if (keys := logged_metric_keys(r.data.metrics))}
    if metrics:
        missing = {rid: [m for m in metrics if m not in keys] for rid, keys in logged.items()}
        missing = {rid: m for rid, m in missing.items() if m}
        if missing:
            listing = "; ".join(f"run {rid} lacks {m}" for rid, m in missing.items())
            available = sorted(set.intersection(*(set(keys) for keys in logged.values())))
            raise RunSelectionError(f"metrics: not evaluated by every run ({listing}); available: {available}")
        return list(metrics)
    if len(logged) < len(runs):
        return None
    return _shared_keys(list(logged.values()), "the runs share no evaluated metric key", primary)


def _shared_keys(key_lists: list[list[str]], none_shared: str, primary: str | None) -> list[str]:
    """The keys every list holds, in the first list's order; a RunSelectionError if none, or not ``primary``."""
    common = [k for k in key_lists[0] if all(k in keys for keys in key_lists)]
    if not common:
        raise RunSelectionError(f"metrics: {none_shared}")
    if primary is not None and primary not in common:
        raise RunSelectionError(f"primary: expected one of the compared metrics {common}, found {primary!r}")
    return common


_SPLIT, _TARGETS = "split (split digest)", "users and targets (targets fingerprint)"


def _check_same(label: str, values: dict[str, object]) -> None:
    if len(set(map(str, values.values()))) > 1:
        listing = "; ".join(f"run {rid}: {str(v)[:16]}" for rid, v in values.items())
        hint = (
            " (a run evaluated with mlflow.models.evaluate needs split_digest, sample_id and n_items in its "
            "evaluator_config and data)"
            if any(v is None for v in values.values())
            else ""
        )
        raise RunSelectionError(f"runs were not evaluated on the same {label}: {listing}{hint}")


def verify_same_evaluation(runs: list[Run], artifacts: dict[str, EvaluationArtifacts]) -> None:
    _check_same(_SPLIT, {r.info.run_id: artifacts[r.info.run_id].split_digest for r in runs})
    _check_same(_TARGETS, {r.info.run_id: artifacts[r.info.run_id].result.targets_fingerprint for r in runs})
    first = runs[0].info.run_id
    ids = artifacts[first].result.sample_ids
    for r in runs[1:]:
        other = artifacts[r.info.run_id].result.sample_ids
        if len(other) != len(ids) or not (other == ids).all():
            raise RunSelectionError(f"runs {first} and {r.info.run_id} hold different sample ids")


def _group(runs: list[Run], model_tag: str) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """Candidate -> seed tag -> run id, and model -> its candidates where it has several (one per configuration,
    named by :func:`configuration_names`), in order of model, then of the values that set them apart."""
    configs: dict[str, dict[str, dict]] = {}  # model -> canonical JSON -> configuration
    members = []
    for r in runs:
        model = r.data.tags.get(model_tag)
        if not model:
            raise RunSelectionError(f"run {r.info.run_id}: expected a {model_tag!r} tag naming its model, found none")
        config = _config(r)
        key = json.dumps(config, sort_keys=True)
        configs.setdefault(model, {})[key] = config
        members.append((r.info.run_id, model, key, r.data.tags.get(tags.SEED, tags.NO_SEED)))
    names: dict[tuple[str, str], str] = {}
    order: dict[tuple[str, str], tuple] = {}
    for model, by_key in configs.items():
        for key, (name, rank) in configuration_names(model, by_key).items():
            names[model, key], order[model, key] = name, (model, rank)
    owner: dict[str, str] = {}
    for (model, _key), name in names.items():
        if name in owner:  # one model's names are distinct, so this is a model named like another's configuration
            raise RunSelectionError(
                f"model names: runs of {owner[name]} and of {model} would both be the candidate {name!r}",
                hint=f"rename a model (its {model_tag} tag) so that the names stay apart",
            )
        owner[name] = model
    groups: dict[str, dict[str, str]] = {}
    for run_id, model, key, seed in sorted(members, key=lambda m: order[m[1], m[2]]):
        name = names[model, key]
        seeds = groups.setdefault(name, {})
        if seed in seeds:
            same = "" if name != model else f" and the same configuration {shorten(key, 200)}"
            raise RunSelectionError(
                f"runs {seeds[seed]} and {run_id} are both {name} with seed {seed}{same}, so they are the same "
                "candidate twice",
                hint="select one: by run ids, by narrowing the filter (a study's runs: "
                "tags.mlflow.parentRunId = '<the study run id>'), or by deleting a run logged twice (the same "
                "lists imported again)",
            )
        seeds[seed] = run_id
    configured = {m: [n for n in groups if owner[n] == m and n != m] for m in sorted(configs)}
    return groups, {m: ns for m, ns in configured.items() if ns}


#: Widest text of one hyper-parameter value in a candidate's name; longer values are cut, with a hash.
CONFIG_VALUE_WIDTH = 40
_BARE_TEXT = re.compile(r"^[A-Za-z0-9_.+\-]+$")
_UNSET = object()


def configuration_names(model: str, configs: dict[str, dict]) -> dict[str, tuple[str, tuple]]:
    """Canonical JSON of each configuration of ``model`` -> (candidate name, sort key): the plain model name for
    one, else ``Model(k1=v1, k2=v2)`` by the hyper-parameters that differ, with short values (``50`` for
    ``50.0``), or exact JSON where short names would coincide (``50`` and ``"50"``); a missing key reads ``unset``."""
    if len(configs) == 1:
        return {key: (model, ()) for key in configs}
    keys = sorted(set().union(*configs.values()))
    differing = [
        k for k in keys if len({json.dumps(c[k], sort_keys=True) if k in c else None for c in configs.values()}) > 1
    ]
    ranks = {key: tuple(_value_rank(c.get(k, _UNSET)) for k in differing) for key, c in configs.items()}
    for text in (_short_value, _exact_value):
        names = {
            key: f"{model}({', '.join(f'{k}={text(c.get(k, _UNSET))}' for k in differing)})"
            for key, c in configs.items()
        }
        if len(set(names.values())) == len(names):
            return {key: (name, ranks[key]) for key, name in names.items()}
    raise RunSelectionError(  # only two values alike in their first characters and their 24-bit hash
        f"model names: configurations of {model} cannot be told apart by name: {sorted(configs)}",
        hint="rename one configuration's model (its model tag)",
    )


def _short_value(value) -> str:
    if value is _UNSET:
        return "unset"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        text = str(int(value))
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, str) and _BARE_TEXT.match(value):
        text = value
    else:
        text = json.dumps(value, sort_keys=True)
    return shorten(text, CONFIG_VALUE_WIDTH)


def _exact_value(value) -> str:
    return "unset" if value is _UNSET else shorten(json.dumps(value, sort_keys=True), CONFIG_VALUE_WIDTH)


def _value_rank(value) -> tuple:
    """Numbers by value, then other values by their JSON, then unset."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return (0, value, "")
    if value is _UNSET:
        return (2, 0, "")
    return (1, 0, json.dumps(value, sort_keys=True))


def _config(run: Run) -> dict:
    text = run.data.tags.get(tags.CONFIG, "{}")
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        config = None
    if not isinstance(config, dict):
        raise RunSelectionError(
            f"run {run.info.run_id}: expected its {tags.CONFIG!r} tag to hold a JSON object of hyper-parameters, "
            f"found {shorten(text, 80)!r}; fix or delete the tag"
        )
    return config


def _representative_seed(model: str, seeds: dict, wanted: str | None) -> str:
    if len(seeds) == 1 or wanted is None:
        return sorted(seeds, key=tags.seed_order)[0]
    if wanted not in seeds:
        known = sorted(seeds, key=tags.seed_order)
        raise RunSelectionError(f"representative_seed: expected one of {model}'s seeds {known}, found {wanted!r}")
    return wanted


def seed_side(seeds: dict[str, tuple[str, EvaluationResult]]):
    if len(seeds) == 1:
        return next(iter(seeds.values()))[1]
    return {int(s) if s.lstrip("-").isdigit() else s: res for s, (_, res) in seeds.items()}


def artifact_metric_keys(metric_keys: list[str] | None, primary, artifacts: dict[str, EvaluationArtifacts]):
    """The metric keys every per-user file holds: ``metric_keys`` checked, or the common keys if None."""
    columns = {run_id: list(art.result.per_user or ()) for run_id, art in artifacts.items()}
    if metric_keys is None:
        return _shared_keys(list(columns.values()), "the runs' per-user files share no metric key", primary)
    for run_id, keys in columns.items():
        missing = [m for m in metric_keys if m not in keys]
        if missing:
            raise RunSelectionError(
                f"run {run_id}: its per_user.parquet has no column for {missing}; it holds {sorted(keys)}"
            )
    return metric_keys


#: Report columns logged as metrics of the comparison run, and seed-table columns logged under ``.seeds``.
REPORT_FIELDS = ("difference", "relative_difference", "ci_low", "ci_high", "p_value", "adjusted_p_value")
SEED_FIELDS = ("mean_difference", "sd_users", "sd_retraining", "ratio", "widens_by", "sign_reversals")


def pair_metric_names(pairs, seed_pairs, metric_keys) -> dict[tuple[str, str, str, str], str]:
    """Every MLflow metric name the comparison run may log (``<candidate>.vs.<baseline>.<metric>[.seed_averaged
    |.seeds].<field>``), one-to-one, long ones through :func:`~mlflow_recsys.tracking._limits.fit_key`; a
    RunSelectionError if two hypotheses would still share one (colliding hashes)."""
    fields = [g for f in REPORT_FIELDS for g in (f, *([f"seed_averaged.{f}"] if seed_pairs else []))]
    wanted = [(*pair, metric, f) for pair in pairs for metric in metric_keys for f in fields]
    wanted += [(*pair, metric, f"seeds.{f}") for pair in seed_pairs for metric in metric_keys for f in SEED_FIELDS]
    names = {key: fit_key(comparison_metric_name(*key)) for key in wanted}
    clashes = duplicates(list(names.values()))
    if clashes:
        owners = sorted({pair_label(b, c) for (b, c, _, _), n in names.items() if n in clashes})
        raise RunSelectionError(
            f"model names: the comparisons {owners} would share the MLflow metric name {clashes[0]!r}; "
            "rename a model (its recsys.model tag) so that the names stay apart"
        )
    return names
