import pytest

from experiments.datasets import load_dataset
from experiments.datasets.demo import DEMO_DIR

needs_demo = pytest.mark.skipif(
    not (DEMO_DIR / "golden.jsonl").is_file(), reason="data/demo/golden.jsonl is not there yet"
)


@needs_demo
def test_demo_loads_both_languages(tmp_path):
    dataset = load_dataset({"kind": "demo", "name": "demo", "language": "auto", "subset": None}, tmp_path)
    prefixes = {doc.id.split("/", 1)[0] for doc in dataset.documents}
    assert prefixes == {"en", "zh"}
    assert dataset.language == "mixed"
    assert dataset.golden and all(doc.id == doc.meta["doc_id"] for doc in dataset.documents)
    for item in dataset.golden:
        for spans in item.evidence_spans:
            assert spans, f"{item.id}: a quote was not located"


@needs_demo
@pytest.mark.parametrize("subset", ["en", "zh"])
def test_demo_subset_keeps_one_language(tmp_path, subset):
    full = load_dataset({"kind": "demo", "language": "auto"}, tmp_path)
    part = load_dataset({"kind": "demo", "name": "demo", "language": "auto", "subset": subset}, tmp_path)
    assert part.name == f"demo-{subset}"
    assert part.language == subset
    assert part.documents and all(doc.id.startswith(f"{subset}/") for doc in part.documents)
    assert part.golden and all(item.id.startswith(f"{subset}-") for item in part.golden)
    assert {item.id for item in part.golden} < {item.id for item in full.golden}
    assert part.fingerprint != full.fingerprint


def test_demo_subset_is_checked(tmp_path):
    with pytest.raises(ValueError, match="dataset.subset: must be one of en, zh or null, got 'fr'"):
        load_dataset({"kind": "demo", "subset": "fr"}, tmp_path)
