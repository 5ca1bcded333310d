"""A study declared in one TOML file: datasets, their split, models with hyper-parameter grids and seeds, runs to
import, the comparison and the verdict across datasets, read and checked into a :class:`StudyPlan` before any run
exists. The command line's one-dataset flags make the same plan (:func:`shorthand_plan`).

Every table of the file is a settings object declared once (:mod:`mlflow_recsys.settings_schema`): the top level is
:class:`StudySettings`, ``[split]`` and a dataset's ``split`` are :class:`~mlflow_recsys.data.SplitConfig`,
``[compare]`` is :class:`~mlflow_recsys.stats.ComparisonSettings`, and a model's keys are its config class's fields.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from mlflow_recsys import _validation as validation
from mlflow_recsys._digests import sha256_file
from mlflow_recsys.data import DATASETS
from mlflow_recsys.data._split_config import SplitConfig
from mlflow_recsys.metrics import parse_metric_keys
from mlflow_recsys.models._registry import MODELS, ModelSpec, model_spec
from mlflow_recsys.models._train_config import DEFAULT_METRICS, TrainConfig
from mlflow_recsys.settings_schema import NONE_WORD, settings_of
from mlflow_recsys.stats._meta import POOLED
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._candidates import configuration_names
from mlflow_recsys.tracking._executors import Training
from mlflow_recsys.tracking._limits import duplicates
from mlflow_recsys.tracking._study_settings import StudySettings
from mlflow_recsys.tracking._training import configuration_tag

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same module, from PyPI, before Python 3.11
    import tomli as tomllib

#: Most trainings one model of a study makes on each dataset (its grid's configurations times its seeds).
MAX_TRAININGS = 1000

#: The columns of a user's own log a dataset may name (``columns = {user = "uid", ...}``).
COLUMN_ROLES = ("user", "item", "value", "timestamp")
#: Hyper-parameters a training checks where it runs: the seed is its own, and the device is that of the machine that
#: trains it (a cluster's driver may have no GPU). The plan checks the others.
_CHECKED_BY_TRAINING = ("seed", "device")


@dataclass(frozen=True)
class StudyDataset:
    """One dataset of a study: a registered name, or a user's log at ``path`` with its ``columns`` (role -> column
    name, None for a value or time column the log lacks), and the split made of it."""

    name: str
    path: str | None
    columns: Mapping[str, str | None]
    split: SplitConfig


@dataclass(frozen=True)
class StudyModel:
    """One model of a study: its configurations (hyper-parameters without the seed; one unless a grid), its seeds
    (seeded models), runs imported by id per dataset (a model trained elsewhere, or an extra run), and, for a model
    trained elsewhere, its recommendation lists per dataset (a file :func:`~mlflow_recsys.tracking.log_recommendations`
    imports once the dataset's split is made)."""

    name: str
    configurations: tuple[Mapping[str, Any], ...]
    seeds: tuple[int, ...]
    runs: Mapping[str, tuple[str, ...]]
    recommendations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    register: str | None = None


@dataclass(frozen=True)
class StudyPlan:
    """Everything a study will do, checked: its settings, datasets, models, the trainings each dataset gets, and the
    comparison each dataset's runs go through."""

    settings: StudySettings
    datasets: tuple[StudyDataset, ...]
    models: tuple[StudyModel, ...]
    comparison: ComparisonSettings

    @property
    def metrics(self) -> tuple[str, ...]:
        """What every training scores: the study's ``metrics``, else the train step's set and any compared metric
        beyond it."""
        keys = self.settings.metrics or tuple(dict.fromkeys([*DEFAULT_METRICS, *(self.comparison.metrics or ())]))
        try:  # in the order a training logs them (keys of one metric together), so every executor logs the same
            return tuple(key for metric in parse_metric_keys(list(keys)) for key in metric.keys)
        except ValueError:
            return tuple(keys)  # refused by the plan's checks, which name the key

    @property
    def compared_metrics(self) -> tuple[str, ...]:
        """What every run of a dataset must have scored to be compared: the compared metrics, else the primary one
        (without either, the comparison takes the metrics the runs share)."""
        primary = (self.comparison.primary,) if self.comparison.primary else ()
        return self.comparison.metrics or primary

    def trainings(self) -> list[Training]:
        """Each dataset's trainings: every configuration of every registered model under each of its seeds."""
        return [t for model in self.models for t in _trainings(model)]


def read_study(path: str | os.PathLike) -> StudyPlan:
    """The study a TOML file declares, checked whole before anything runs.

    Parameters
    ----------
    path : str or path
        The study file (UTF-8 TOML). A dataset's ``path`` is taken relative to the file's folder.

    Returns
    -------
    StudyPlan

    Raises
    ------
    ValueError
        Naming the file, the key and what was expected: for a file that is not TOML, an unknown key, a value its
        settings refuse, a dataset or model listed twice, a grid with a repeated value, a hyper-parameter the model
        does not take, seeds that are not distinct integers (or given to a model without seeds), runs imported for a
        dataset the study lacks, a reference that names no model or a model of several configurations, or a primary
        metric the trainings do not score.
    OSError
        If the file cannot be read.
    """
    file = Path(path)
    if not file.is_file():
        found = "a folder" if file.is_dir() else "no file"
        raise ValueError(f"study file: expected a TOML file, found {found} at {str(file)!r}")
    try:
        # utf-8-sig: an editor's byte-order mark is no TOML error
        data = tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{file}: expected a TOML file, found: {exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{file}: expected UTF-8 text, found bytes that are not") from None
    top = _Table(str(file), "", data)
    tables = {"split": "table", "compare": "table", "dataset": "array", "model": "array"}
    top.only([*settings_of(StudySettings), *tables])
    settings = top.build(StudySettings, {k: v for k, v in data.items() if k not in tables})
    split = top.table("split")
    split.build(SplitConfig, split.values)  # its own mistakes named in [split], not in each dataset
    datasets = tuple(_dataset(entry, split.values, file.parent) for entry in top.array("dataset"))
    models = tuple(_model(entry, file.parent) for entry in top.array("model"))
    comparison = top.table("compare").build(ComparisonSettings, top.table("compare").values)
    return _checked(StudyPlan(settings, datasets, models, comparison), top)


def shorthand_plan(
    *,
    dataset: str,
    split_seed: int,
    seeds: Sequence[int],
    ease: Mapping[str, Any],
    elsa: Mapping[str, Any],
    comparison: ComparisonSettings,
    executor: str = "sequential",
    ray_address: str | None = None,
) -> StudyPlan:
    """The one-dataset study of the command line's flags: EASE once and ELSA under each seed on ``dataset``,
    compared with EASE as the reference. A ValueError names the flag's setting, as :func:`read_study` does."""
    top = _Table("", "", {})  # the options name themselves: no file, no table
    listed = [validation.integer(s, "seeds") for s in validation.ordered(seeds, "seeds", "a list of integer seeds")]
    if len(listed) < 2:
        raise ValueError(f"seeds: expected at least 2 ELSA seeds to measure retraining spread, found {listed}")
    repeated = duplicates([str(s) for s in listed])
    if repeated:
        raise ValueError(f"seeds: expected each seed once, found {', '.join(repeated)} more than once in {listed}")
    settings = top.build(StudySettings, {"name": f"study {dataset}", "executor": executor, "ray_address": ray_address})
    plan = StudyPlan(
        settings=settings,
        datasets=(_dataset(_Table("", "", {"name": dataset, **_log_path(dataset)}), {"seed": split_seed}, Path()),),
        models=(
            _model(_Table("", "", {"name": "EASE", **ease}), Path()),
            _model(_Table("", "", {"name": "ELSA", "seeds": listed, **elsa}), Path()),
        ),
        comparison=comparison,
    )
    return _checked(plan, top)


class _Table:
    """One table of a study file, and where it is, for messages that name the file and the key."""

    def __init__(self, file: str, place: str, values: Any):
        self.file, self.place = file, place
        if not isinstance(values, dict):
            raise ValueError(f"{file}: " + validation.expected(place or "the file", "a table", values))
        self.values: dict[str, Any] = values

    def fail(self, message: str) -> NoReturn:
        raise ValueError(": ".join(part for part in (self.file, self.place, message) if part))

    def only(self, keys: Sequence[str], values: Mapping[str, Any] | None = None) -> None:
        unknown = [k for k in (self.values if values is None else values) if k not in keys]
        if unknown:
            self.fail(f"{unknown[0]}: unknown key; expected one of {', '.join(keys)}")

    def table(self, key: str) -> _Table:
        return _Table(self.file, f"{self.place}.{key}" if self.place else f"[{key}]", self.values.get(key, {}))

    def array(self, key: str) -> list[_Table]:
        entries = self.values.get(key, [])
        if not isinstance(entries, list):
            self.fail(validation.expected(key, f"an array of tables [[{key}]]", entries))
        return [_Table(self.file, f"[[{key}]] {i + 1}", entry) for i, entry in enumerate(entries)]

    def build(self, cls: type, values: Mapping[str, Any]) -> Any:
        """``cls(**values)``, with ``"none"`` as None where a setting may be unset (TOML has no null); every other
        value in its TOML type, so ``"42"`` is no number here. A refusal names this table."""
        declared = settings_of(cls)
        self.only(list(declared), values)
        converted = {k: None if _is_none(v) and declared[k][1].optional else v for k, v in values.items()}
        try:
            return cls(**converted)
        except ValueError as exc:
            self.fail(str(exc))


def _log_path(dataset: str) -> dict[str, str]:
    """The one-dataset study's ``--dataset``: a registered name, or else the path of a log."""
    return {} if dataset in DATASETS else {"path": dataset}


def _is_none(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == NONE_WORD


def _dataset(entry: _Table, split: Mapping[str, Any], folder: Path) -> StudyDataset:
    entry.only(["name", "path", "columns", "split"])
    if "name" not in entry.values:
        entry.fail("name: expected the dataset's name, found none")
    name = _line(entry, "name")
    if name == POOLED:
        entry.fail(f"name: {POOLED!r} names the pooled row of the verdict; call the dataset otherwise")
    path = None
    if "path" in entry.values:
        path = str((folder / _line(entry, "path")).resolve())  # the steps run in the project's folder
        if not Path(path).is_file():
            found = "a folder" if Path(path).is_dir() else "no file"
            entry.fail(f"path: expected your log's .csv or .parquet file, found {found} at {path!r}")
    elif name not in DATASETS:
        entry.fail(f"name: expected a registered dataset ({', '.join(DATASETS)}) or a path, found {name!r}")
    elif "columns" in entry.values:
        entry.fail(f"columns: {name} is registered with columns of its own; columns name those of a log at a path")
    columns_table = entry.table("columns")
    columns_table.only(list(COLUMN_ROLES))
    columns = {}
    for role in columns_table.values:
        column = _line(columns_table, role)
        columns[role] = None if role in ("value", "timestamp") and column.lower() == "none" else column
    own = entry.table("split")
    merged = {**split, **own.values}
    if "min_rating" not in merged and columns.get("value", "") is None:
        merged["min_rating"] = "none"  # implicit feedback: every row a positive, as the split command does
    return StudyDataset(name, path, columns, own.build(SplitConfig, merged))


def _model(entry: _Table, folder: Path) -> StudyModel:
    """One ``[[model]]``: a registered model's grid and seeds, or a model whose runs or lists are imported (file
    paths relative to ``folder``)."""
    if "name" not in entry.values:
        entry.fail("name: expected the model's name, found none")
    name = _line(entry, "name")
    runs = _runs(entry.table("runs")) if "runs" in entry.values else {}
    if name not in MODELS:
        entry.only(["name", "runs", "recommendations"])
        lists = _files(entry.table("recommendations"), folder)
        if not runs and not lists:
            what = f"a registered model ({', '.join(MODELS)}), or runs or recommendations to import"
            entry.fail(f"name: expected {what}, found {name!r}")
        return StudyModel(name, (), (), runs, lists)
    spec = model_spec(name)
    takes = [h for h in spec.hyperparameters if h != "seed"]
    entry.only(["name", "seeds", "runs", "register", *takes])
    if runs:
        entry.fail(f"runs: {name} is trained by the study; import runs under the name of the model that made them")
    seeds = _seeds(entry, spec.seeded)
    axes = {k: _grid(entry, k) for k in takes if k in entry.values}
    size = math.prod(len(v) for v in axes.values()) * max(len(seeds), 1)
    if size > MAX_TRAININGS:
        entry.fail(f"expected at most {MAX_TRAININGS:,} trainings (configurations x seeds) a model, found {size:,}")
    configurations = tuple(dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values()))
    made: dict[str, Mapping[str, Any]] = {}
    for configuration in configurations:
        try:
            tag = _configuration_tag(spec, configuration)
        except ValueError as exc:
            entry.fail(str(exc))
        if tag in made:  # 50 and 50.0, or two devices: one candidate, which a comparison would see twice
            entry.fail(f"expected distinct configurations, found {made[tag]} and {configuration}, which are one")
        made[tag] = configuration
    register = _line(entry, "register") if "register" in entry.values else None
    if register is not None:
        try:
            TrainConfig(name, register=register)
        except ValueError as exc:
            entry.fail(str(exc))
    return StudyModel(name, configurations, seeds, {}, register=register)


def _line(table: _Table, key: str) -> str:
    try:
        return validation.line(table.values[key], key, longest=500)
    except ValueError as exc:
        table.fail(str(exc))


def _seeds(entry: _Table, seeded: bool) -> tuple[int, ...]:
    if "seeds" not in entry.values:
        return (0,) if seeded else ()
    if not seeded:
        entry.fail(f"seeds: {entry.values['name']} draws no random numbers, so it takes no seeds; found seeds")
    seeds = _grid(entry, "seeds")
    for seed in seeds:
        try:
            # An integer; its range is the training's own check, so a seed the model refuses fails that training
            # alone, as the run_study docs say.
            validation.integer(seed, "seeds")
        except ValueError as exc:
            entry.fail(str(exc))
    return tuple(seeds)


def _grid(entry: _Table, key: str) -> list[Any]:
    """A key's values: a list is a grid of distinct values, anything else one value."""
    value = entry.values[key]
    values = value if isinstance(value, list) else [value]
    if not values:
        entry.fail(f"{key}: expected a value or a list of values, found an empty list")
    repeated = duplicates([json.dumps(v, sort_keys=True) for v in values])
    if repeated:
        entry.fail(f"{key}: expected each value of a grid once, found {', '.join(repeated)} more than once")
    return values


def _runs(table: _Table) -> dict[str, tuple[str, ...]]:
    """``runs = {dataset = ["<run id>", ...]}``: runs imported for each dataset."""
    runs = {}
    for dataset, ids in table.values.items():
        listed = ids if isinstance(ids, list) else [ids]
        if not listed or not all(isinstance(i, str) and i.strip() for i in listed):
            table.fail(validation.expected(dataset, "run ids (text), one or a list", ids))
        runs[dataset] = tuple(i.strip() for i in listed)
    return runs


def _files(table: _Table, folder: Path) -> dict[str, str]:
    """``recommendations = {dataset = "lists.parquet"}``: a file of lists for each dataset, which must exist."""
    files = {}
    for dataset in table.values:
        path = (folder / _line(table, dataset)).resolve()
        if not path.is_file():
            table.fail(f"{dataset}: expected a .parquet, .csv or TREC file of lists, found no file at {str(path)!r}")
        files[dataset] = str(path)
    return files


def _configuration_tag(spec: ModelSpec, configuration: Mapping[str, Any]) -> str:
    """The ``recsys.config`` tag a training of ``configuration`` will hold, as the train step fills in its defaults;
    ValueError for a value the model's config refuses (the seed and device are the training's to check)."""
    shared = {k: v for k, v in configuration.items() if k not in _CHECKED_BY_TRAINING}
    return configuration_tag(spec.build({**spec.train_defaults, **shared}).config)


def _trainings(model: StudyModel) -> list[Training]:
    spec = MODELS.get(model.name)
    if spec is None:
        return []  # imported only
    by_tag = {_configuration_tag(spec, configuration): configuration for configuration in model.configurations}
    labels = configuration_names(model.name, {tag: json.loads(tag) for tag in by_tag})
    out = []
    for tag, configuration in by_tag.items():
        label = labels[tag][0]
        for seed in model.seeds or (None,):
            hyperparameters = {**configuration, **({"seed": seed} if seed is not None else {})}
            run_name = f"{label} seed {seed}" if seed is not None else label
            seed_tag = tags.NO_SEED if seed is None else str(seed)
            out.append(Training(model.name, hyperparameters, run_name, tag, seed_tag, label, model.register))
    return out


def candidate_names(plan: StudyPlan) -> list[str]:
    """The names the comparisons will give the study's candidates: a model, or ``Model(k=v)`` per configuration
    of a grid."""
    names = list(dict.fromkeys(t.candidate for t in plan.trainings()))
    return names + [m.name for m in plan.models if m.name not in MODELS]  # imported by id or from lists


def _checked(plan: StudyPlan, top: _Table) -> StudyPlan:
    """The checks that span tables."""
    for what, names in (("dataset", [d.name for d in plan.datasets]), ("model", [m.name for m in plan.models])):
        if not names:
            top.fail(f"[[{what}]]: expected at least one {what}, found none")
        repeated = duplicates(names)
        if repeated:
            top.fail(f"[[{what}]] name: expected each {what} once, found {', '.join(repeated)} more than once")
    _check_sources(plan, top)
    _check_imports(plan, top)
    candidates = candidate_names(plan)
    if len(candidates) < 2:
        top.fail(f"[[model]]: expected at least two candidates to compare, found {candidates}")
    given, executor = plan.settings.ray_address, plan.settings.executor
    if given is not None and executor != "ray":
        top.fail(f"ray_address: only the ray executor joins a Ray cluster, found {given!r} with executor {executor!r}")
    compare = _Table(top.file, "[compare]", {})
    try:  # a key no metric scores would fail every training, after the splits
        parse_metric_keys(list(plan.metrics))
    except ValueError as exc:
        reason = str(exc).removeprefix("key: ")
        (top if plan.settings.metrics else compare).fail(f"metrics: {reason}")
    reference, primary, seed = plan.comparison.reference, plan.comparison.primary, plan.comparison.representative_seed
    if reference is not None and reference not in candidates:
        several = [c for c in candidates if c.startswith(f"{reference}(")]
        hint = f"; {reference} is one candidate per configuration: name one of {several}" if several else ""
        compare.fail(f"reference: expected one of the candidates {candidates}, found {reference!r}{hint}")
    if primary is not None and primary not in plan.metrics:
        compare.fail(f"primary: expected one of the scored metrics {list(plan.metrics)}, found {primary!r}")
    missing = [m for m in plan.comparison.metrics or () if m not in plan.metrics]
    if missing:
        compare.fail(f"metrics: expected metrics the trainings score {list(plan.metrics)}, found {missing[0]!r}")
    seeds = sorted({str(s) for m in plan.models for s in m.seeds})
    if seed is not None and seed not in seeds:
        compare.fail(
            f"representative_seed: expected a seed of a seeded model ({', '.join(seeds) or 'none'}), found {seed!r}"
        )
    return plan


def _check_sources(plan: StudyPlan, top: _Table) -> None:
    """Two datasets of one log split alike are one dataset: the verdict would count its evidence twice."""
    seen: dict[str, str] = {}
    for d in plan.datasets:
        source = f"the log with sha256 {sha256_file(d.path)}" if d.path else d.name
        key = json.dumps([source, d.split.to_params(), dict(d.columns)], sort_keys=True)
        if key in seen:
            top.fail(
                f"[[dataset]] {d.name}: expected other data or another split than dataset {seen[key]!r}, found "
                f"{source} split alike; across datasets it would count twice"
            )
        seen[key] = d.name


def _check_imports(plan: StudyPlan, top: _Table) -> None:
    """Imports name datasets of the study, and no run twice."""
    datasets = {d.name for d in plan.datasets}
    for model in plan.models:
        for key, given in (("runs", model.runs), ("recommendations", model.recommendations)):
            unknown = [d for d in given if d not in datasets]
            if unknown:
                known = ", ".join(sorted(datasets))
                top.fail(
                    f"[[model]] {model.name} {key}: expected datasets of the study ({known}), found {unknown[0]!r}"
                )
    ids = [run_id for m in plan.models for listed in m.runs.values() for run_id in listed]
    repeated = duplicates(ids)
    if repeated:
        top.fail(f"[[model]] runs: expected each run once, found {', '.join(repeated)} more than once")
    labels = [t.candidate for t in plan.trainings()]
    clash = [m.name for m in plan.models if m.name not in MODELS and m.name in labels]
    if clash:
        top.fail(f"[[model]] name: {clash[0]!r} names a configuration of a trained model; name the import otherwise")
