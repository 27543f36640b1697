"""Dev and test questions of one golden set: a seeded split, stratified by category, language and answerability.

A search (a sweep, an Optuna study) tunes on `dev` and reports on `test`, questions it never saw, so the figure it
reports holds beyond the questions it was tuned on. The split depends only on the items (their ids and strata) and
the seed, not on file order or machine. An empty part is refused before any indexing; a part too small for a
confidence interval to mean anything is warned about.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Sequence

from components.common.text import detect_language
from experiments.comparison.significance import ci_note
from experiments.datasets.base import Dataset, DatasetError, golden_fingerprint, seeded_rank
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.settings import HoldoutSettings

ALL, DEV, TEST = "all", "dev", "test"
# The config key (and the run param) naming the part a run answers: parts of one golden set have fingerprints of
# their own, and an Optuna study sets it itself.
USE_KEY = "dataset.holdout.use"


def stratum(item: GoldenItem) -> tuple[str, str, bool]:
    """What the parts keep in proportion: category, the question's language, answerable or not."""
    return item.category or "none", detect_language(item.question), bool(item.answerable)


def held_out_ids(items: Sequence[GoldenItem], test_share: float, seed: int) -> frozenset[str]:
    """The ids of the test part: in each stratum, the items first in a seeded hash order, as many as the share
    asks; the rounding is carried from stratum to stratum, so the total is the share of the whole set."""
    strata: dict[tuple[str, str, bool], list[GoldenItem]] = defaultdict(list)
    for item in items:
        strata[stratum(item)].append(item)
    chosen: list[str] = []
    carried = 0.0
    for key in sorted(strata):
        members = sorted(strata[key], key=lambda item: seeded_rank(seed, item.id))
        wanted = len(members) * test_share + carried
        take = min(len(members), int(wanted + 0.5))
        carried = wanted - take
        chosen += [item.id for item in members[:take]]
    return frozenset(chosen)


def holdout(dataset: Dataset, settings: HoldoutSettings) -> Dataset:
    """`dataset` with only the golden part `settings.use` names; its fingerprint says which part it holds."""
    if settings.use == ALL:
        return dataset
    test = held_out_ids(dataset.golden, settings.test_share, settings.seed)
    golden = [item for item in dataset.golden if (item.id in test) == (settings.use == TEST)]
    sizes = (f"{len(golden)} of the {len(dataset.golden)} questions of {dataset.name} at "
             f"dataset.holdout.test_share={settings.test_share}")
    if not golden:
        raise DatasetError(f"dataset.holdout.use={settings.use}: the {settings.use} part is empty ({sizes}); use a "
                           "larger golden set or another dataset.holdout.test_share, or dataset.holdout.use=all")
    note = ci_note(len(golden))
    if note:
        print(f"warning: dataset.holdout.use={settings.use}: the part holds {sizes}: {note}", file=sys.stderr)
    part = {"use": settings.use, "test_share": settings.test_share, "seed": settings.seed}
    return dataclasses.replace(
        dataset,
        golden=golden,
        golden_fingerprint=golden_fingerprint(golden),
        fingerprint=hashlib.sha256(f"{dataset.fingerprint}:{json.dumps(part, sort_keys=True)}".encode()).hexdigest(),
        source={**dataset.source, "holdout": part, "questions_in_set": len(dataset.golden)},
    )
