"""The `dataset` config group as typed records, one per `dataset.kind`.

conf/dataset/*.yaml extend them (Hydra's ConfigStore, as `schema_<kind>`), and a config written by hand (a test's,
a benchmark's) is typed by the same records in `dataset_settings`, so a default is written once, here. A value
that cannot work fails naming its `dataset.<key>`.
"""

from __future__ import annotations

import codecs
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from components.common.text import LANGUAGES
from experiments.datasets.base import DatasetError
from pipelines.choices import choices
from pipelines.conversion import AUTO_ENCODING

DEMO_SUBSETS = ("en", "zh")
HoldoutPart = choices("HoldoutPart", ("all", "dev", "test"))
Language = choices("Language", LANGUAGES)


@dataclass
class HoldoutSettings:
    # all: every golden question; dev: the part a search tunes on; test: the questions it never sees, to report on.
    use: HoldoutPart = HoldoutPart.all  # type: ignore[valid-type,attr-defined]
    # The share of the questions in the test part, kept in each category, language and answerability.
    test_share: float = 0.3
    # The split's seed: the same seed and ids give the same parts on every machine.
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.test_share < 1:
            raise DatasetError(f"dataset.holdout.test_share: must be in (0, 1), got {self.test_share!r}")


@dataclass
class DatasetSettings:
    # The data set's name: runs go to the MLflow experiment of this name, unless mlflow.experiment says otherwise.
    name: str = MISSING
    # demo | local | beir | halueval: which loader reads it.
    kind: str = MISSING
    # auto: detected from the corpus. Picks tokenisers, prompts and refusals.
    language: Language = Language.auto  # type: ignore[valid-type,attr-defined]
    # Dev and test parts of the golden set (experiments/datasets/holdout.py).
    holdout: HoldoutSettings = field(default_factory=HoldoutSettings)
    # A SQLite file or .sql script with the data set's tables, for pipeline=agentic's read-only sql_query tool
    # (relative paths resolve against the directory you run from); null: the agent searches documents only.
    sql: str | None = None


@dataclass
class GoldenFileSettings(DatasetSettings):
    """The kinds whose golden set is golden JSONL files (demo, local)."""

    # Also load the golden items still marked "status": "candidate" (written by `ragtune harvest`, not reviewed yet);
    # false: reviewed items only, and one log line says how many candidates were skipped.
    include_candidates: bool = False


@dataclass
class DemoDataset(GoldenFileSettings):
    name: str = "demo"
    kind: str = "demo"
    # en | zh: one language folder only (doc ids under "<subset>/", golden ids "<subset>-*"); null: both.
    subset: str | None = None
    # Golden files of data/demo to answer: golden.jsonl (single questions); golden_routes.jsonl (greetings and vague
    # questions, route no_retrieval / clarify, scored on their route and cost only); golden_conversations.jsonl
    # (follow-ups with their chat history, and comparisons; dataset=demo_conversations); golden_agent.jsonl (questions
    # that need the company tables, dataset=demo_agent).
    golden: list[str] = field(default_factory=lambda: ["golden.jsonl", "golden_routes.jsonl"])
    # JSONL of {"doc_id": ..., "tenant": ..., "acl": [...]} merged into each document's metadata, e.g.
    # data/demo/tenants.jsonl (three tenants, for the server's tenant scoping and `ragtune audit`).
    meta_file: str | None = None

    def __post_init__(self) -> None:
        if self.subset is not None and self.subset not in DEMO_SUBSETS:
            raise DatasetError(f"dataset.subset: must be one of {', '.join(DEMO_SUBSETS)} or null, got {self.subset!r}")


@dataclass
class LocalDataset(GoldenFileSettings):
    name: str = "local"
    kind: str = "local"
    # Your corpus: a folder of .txt/.md/.html/.pdf/.docx/.pptx/.xlsx/.csv files (relative paths resolve against the
    # directory you run from). Word and Excel tables become Markdown tables, one `## sheet` section per sheet.
    corpus_dir: str = MISSING
    # Its golden set, a JSONL file (docs/datasets.md#golden-jsonl); none yet: `ragtune testset` writes one.
    golden: str | None = None
    # Which files of corpus_dir to read; hidden files and folders are always left out.
    glob: str = "**/*"
    # Text encoding of .txt/.md/.csv files: auto (UTF-8, else the detected charset when the detection is sure) or a
    # Python codec such as gbk, big5, latin-1. Files that still cannot be read, or whose charset is uncertain or
    # mixed, are listed as skipped, with the reason.
    encoding: str = AUTO_ENCODING
    # JSONL of {"doc_id": ..., "tenant": ..., "acl": [...]} merged into each document's metadata.
    meta_file: str | None = None

    def __post_init__(self) -> None:
        if self.encoding != AUTO_ENCODING:
            try:
                codecs.lookup(self.encoding)
            except LookupError:
                raise DatasetError(
                    f"dataset.encoding: unknown codec {self.encoding!r} "
                    f"(use {AUTO_ENCODING} or a Python codec name such as utf-8, gbk, big5, cp1252)"
                ) from None


@dataclass
class BeirDataset(DatasetSettings):
    name: str = "beir"
    kind: str = "beir"
    # A BEIR folder: corpus.jsonl, queries.jsonl (optional "answer"), qrels/<split>.tsv or qrels.tsv.
    path: str = MISSING
    # The qrels split whose queries are asked.
    split: str = "test"
    # The first N queries with a positive qrel; null: all.
    max_queries: int | None = None

    def __post_init__(self) -> None:
        _at_least("max_queries", self.max_queries, 1, nullable=True)


@dataclass
class HaluEvalDataset(DatasetSettings):
    name: str = "halueval"
    kind: str = "halueval"
    language: Language = Language.en  # type: ignore[valid-type,attr-defined]
    # Questions evaluated, a seeded sample of HaluEval-QA's 10,000; null: all.
    sample: int | None = 200
    # The sample's seed.
    seed: int = 0
    # HaluEval summarization documents added to the corpus as distractors.
    distractors: int = 0
    # The last N sampled questions made unanswerable: a filter hides each one's own passage (for CRAG calibration).
    unanswerable: int = 0

    def __post_init__(self) -> None:
        _at_least("sample", self.sample, 1, nullable=True)
        for key in ("seed", "distractors", "unanswerable"):
            _at_least(key, getattr(self, key), 0, nullable=False)


KINDS: dict[str, type[DatasetSettings]] = {
    "demo": DemoDataset,
    "local": LocalDataset,
    "beir": BeirDataset,
    "halueval": HaluEvalDataset,
}


def dataset_settings(config: Any) -> DatasetSettings:
    """A dataset config (Hydra's, or a mapping written by hand) as the record of its `kind`."""
    if isinstance(config, DatasetSettings):
        return config
    values = OmegaConf.to_container(config, resolve=True) if OmegaConf.is_config(config) else dict(config)
    kind = values.get("kind")
    if kind not in KINDS:
        raise DatasetError(f"dataset.kind: unknown kind {kind!r} (valid: {', '.join(KINDS)})")
    record = KINDS[kind]
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(record), values))  # type: ignore[return-value]
    except MissingMandatoryValue as e:
        raise DatasetError(f"dataset.{e.full_key}: required for dataset.kind={kind!r}") from None
    except ConfigKeyError as e:
        valid = ", ".join(sorted(OmegaConf.structured(record)))
        raise DatasetError(
            f"dataset.{e.full_key}: unknown key for dataset.kind={kind!r} (valid keys: {valid})"
        ) from None
    except OmegaConfBaseException as e:
        if values.get(e.full_key, "") is None:  # null where the record takes no null
            defaults = {f.name: f.default for f in dataclasses.fields(record)}
            need = f"required for dataset.kind={kind!r}" if defaults.get(e.full_key) == MISSING else "must not be null"
            raise DatasetError(f"dataset.{e.full_key}: {need}") from None
        raise DatasetError(f"dataset.{e.full_key}: {str(e.msg).splitlines()[0]}") from None


def _at_least(key: str, value: int | None, minimum: int, *, nullable: bool) -> None:
    if value is None and nullable:
        return
    if value is None or value < minimum:
        raise DatasetError(
            f"dataset.{key}: must be an integer >= {minimum}{' or null' if nullable else ''}, got {value!r}"
        )
