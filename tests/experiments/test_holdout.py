"""dataset.holdout: dev and test parts of a golden set, seeded and stratified."""

import random
from collections import Counter
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from experiments.datasets import load_dataset
from experiments.datasets.base import DatasetError
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.holdout import held_out_ids, stratum
from experiments.runs.config import compose


def items() -> list[GoldenItem]:
    made = [GoldenItem(id=f"en-{i}", question=f"How many days in case {i}?", category="numeric", evidence=("x",))
            for i in range(20)]
    made += [GoldenItem(id=f"zh-{i}", question=f"第{i}种情况有多少天？", category="numeric", evidence=("x",))
             for i in range(10)]
    made += [GoldenItem(id=f"un-{i}", question=f"Can I bring pet {i}?", category="unanswerable") for i in range(7)]
    return made


def test_each_stratum_keeps_its_share_and_the_whole_set_too():
    test = held_out_ids(items(), 0.3, seed=0)
    per_stratum = Counter(stratum(item) for item in items() if item.id in test)
    assert per_stratum == {("numeric", "en", True): 6, ("numeric", "zh", True): 3, ("unanswerable", "en", False): 2}
    assert len(test) == round(len(items()) * 0.3)


def test_the_split_depends_on_the_seed_and_not_on_the_order_of_the_file():
    shuffled = items()
    random.Random(1).shuffle(shuffled)
    assert held_out_ids(shuffled, 0.3, seed=0) == held_out_ids(items(), 0.3, seed=0)
    assert held_out_ids(items(), 0.3, seed=1) != held_out_ids(items(), 0.3, seed=0)


def test_dev_and_test_part_the_demo_and_carry_their_own_fingerprints():
    parts = {use: load_dataset({"kind": "demo", "holdout": {"use": use}}, Path(".")) for use in ("all", "dev", "test")}
    ids = {use: {item.id for item in dataset.golden} for use, dataset in parts.items()}
    assert ids["dev"] & ids["test"] == set() and ids["dev"] | ids["test"] == ids["all"]
    assert len(ids["test"]) == round(len(ids["all"]) * 0.3)
    assert len({dataset.fingerprint for dataset in parts.values()}) == 3
    assert parts["dev"].corpus_fingerprint == parts["all"].corpus_fingerprint  # one index serves both parts
    assert parts["test"].source["holdout"] == {"use": "test", "test_share": 0.3, "seed": 0}


def test_the_part_is_chosen_on_the_command_line_and_checked():
    assert compose(["dataset.holdout.use=dev"]).dataset.holdout.use == "dev"
    with pytest.raises(DatasetError, match=r"dataset.holdout.use: Invalid value 'train', expected one of \[all, dev, test\]"):
        load_dataset({"kind": "demo", "holdout": {"use": "train"}}, Path("."))
    with pytest.raises(ConfigCompositionException, match="dataset.holdout.use=train") as failed:
        compose(["dataset.holdout.use=train"])  # refused while Hydra composes, naming every part
    assert "expected one of [all, dev, test]" in str(failed.value.__cause__)
    with pytest.raises(DatasetError, match=r"dataset.holdout.test_share: must be in \(0, 1\), got 1.0"):
        load_dataset({"kind": "demo", "holdout": {"test_share": 1.0}}, Path("."))
