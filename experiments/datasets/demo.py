"""`dataset.kind=demo`: the bilingual handbook shipped in data/demo, optionally one language folder only."""

from __future__ import annotations

from pathlib import Path

from experiments.datasets.base import (
    Dataset,
    DatasetError,
    make_dataset,
    package_versions,
    resolve_path,
)
from experiments.datasets.golden.evidence import load_golden, locate_evidence
from experiments.datasets.local import load_corpus
from experiments.datasets.settings import DemoDataset
from pipelines.conversion import AUTO_ENCODING, CONVERSION_PACKAGES

DEMO_DIR = Path(__file__).resolve().parents[2] / "data" / "demo"


def load_demo(config: DemoDataset) -> Dataset:
    """Load the demo like a local corpus; `subset` keeps doc ids under "<subset>/" and golden ids "<subset>-*".

    `golden` names the golden files of data/demo to answer: golden.jsonl (single questions, the default) and
    golden_conversations.jsonl (follow-ups with their chat history, and comparisons; `dataset=demo_conversations`).
    """
    subset = config.subset
    corpus_dir = DEMO_DIR / "corpus"
    names = list(config.golden)
    golden_paths = [DEMO_DIR / name for name in names]
    missing = [str(path) for path in golden_paths if not path.is_file()]
    if missing:
        shipped = sorted(path.name for path in DEMO_DIR.glob("golden*.jsonl"))
        raise DatasetError(f"dataset.golden: no demo golden file {missing[0]}; shipped: {', '.join(shipped)}")
    if not corpus_dir.is_dir():
        raise DatasetError(f"dataset.kind=demo: the shipped demo is incomplete, expected {corpus_dir}")

    meta_path = resolve_path(config.meta_file, "meta_file", is_dir=False) if config.meta_file else None
    documents, skipped = load_corpus(corpus_dir, "**/*", meta_path, AUTO_ENCODING)
    golden = [item for path in golden_paths
              for item in load_golden(path, documents, skipped, config.include_candidates)]
    if subset is not None:
        # Re-locate within the subset so no span or relevant doc points outside the searched documents.
        documents = [doc for doc in documents if doc.id.startswith(f"{subset}/")]
        items = [item for item in golden if item.id.startswith(f"{subset}-")]
        golden = locate_evidence(items, documents, f"{', '.join(names)} (dataset.subset={subset})")

    settings = {"kind": "demo", "subset": subset, "golden": names}
    source = {
        "corpus_dir": str(corpus_dir),
        "golden": [str(path) for path in golden_paths],
        "meta_file": str(meta_path) if meta_path else None,
        "documents": len(documents),
        "package_versions": package_versions(*CONVERSION_PACKAGES),
    }
    name = config.name + (f"-{subset}" if subset else "")
    return make_dataset(name, config.language, documents, golden, settings, source, skipped)
