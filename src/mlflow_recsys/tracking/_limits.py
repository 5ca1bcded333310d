"""MLflow's size limits, and the one way this package fits what it logs inside them.

MLflow rejects a metric, param or tag key over 250 characters, and cuts param values over 6,000 and tag values (run
notes included) over 8,000 characters without a word (``mlflow.utils.validation``). The SQL stores keep run names in
a 250-character column. Nothing logged here relies on either behaviour: keys are shortened one-to-one, long values
are replaced by a pointer to an artifact that holds them whole, and texts are chosen from versions that fit.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Iterable

from mlflow_recsys._digests import text_digest

#: Longest metric, param or tag key MLflow accepts.
MAX_KEY_LENGTH = 250
#: Longest param value MLflow keeps.
MAX_PARAM_LENGTH = 6000
#: Longest tag value (and run note) MLflow keeps.
MAX_TAG_LENGTH = 8000
#: Longest run name a SQL tracking store keeps.
MAX_RUN_NAME_LENGTH = 250


def fit_key(key: str, limit: int = MAX_KEY_LENGTH) -> str:
    """``key`` unchanged if it fits, else a readable prefix, ``-`` and a hash of the whole key: distinct keys stay
    distinct (up to a 40-bit hash collision, which the callers check for)."""
    if len(key) <= limit:
        return key
    tail = "-" + text_digest(key)
    return key[: limit - len(tail)] + tail


def fit_text(versions: Iterable[str], limit: int = MAX_TAG_LENGTH) -> str:
    """The first of ``versions`` (longest and fullest first) that fits in ``limit`` characters; ValueError if none
    does: the caller's shortest version must be made to fit."""
    for text in versions:
        if len(text) <= limit:
            return text
    raise ValueError(f"expected a version of the text of at most {limit:,} characters, found none")


def storable(text: str) -> str:
    """``text`` as MLflow can store it: UTF-8. A file name's byte that is not UTF-8 (Python holds it as a lone
    surrogate, which MLflow cannot encode) is written as its escape, ``\\udcff``; other text is unchanged."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def fit_values(values: dict[str, str], limit: int, pointer: str) -> dict[str, str]:
    """``values`` with each one longer than ``limit`` replaced by its length, hash and ``pointer``
    (e.g. "the whole value is in settings.json"); :data:`CUT_VALUE` tells such a value."""
    return {
        key: value if len(value) <= limit else f"{len(value):,} characters, sha256 {text_digest(value, 16)}; {pointer}"
        for key, value in values.items()
    }


#: What a value :func:`fit_values` replaced begins with.
CUT_VALUE = re.compile(r"^[0-9,]+ characters, sha256 [0-9a-f]{16}; ")


def duplicates(keys: Iterable[Hashable]) -> list:
    """Keys that occur more than once, each once, in first-seen order; linear (a hash a key), so 40,000 run ids
    take milliseconds."""
    return [key for key, count in Counter(keys).items() if count > 1]  # a Counter keeps first-seen order
