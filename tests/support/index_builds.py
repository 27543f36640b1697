"""Fast index builds for tests about files and processes, not vectors: LengthEmbedder stands in for MiniLM and Gate
lets a test decide who waits on whom."""

import os
import time
from dataclasses import replace
from pathlib import Path

from haystack import Document, component
from haystack.document_stores.in_memory import InMemoryDocumentStore
from omegaconf import OmegaConf

from pipelines.index import build_index, ingest_spec
from tests.support.ingest_corpus import DOCS, chunk_records
from tests.support.shipped import composed


@component
class LengthEmbedder:
    """Stands in for MiniLM where the tests are about files and processes, not vectors: fast and exact."""

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        return {"documents": [replace(d, embedding=[float(len(d.content)), float(d.meta["span"][0])]) for d in documents]}


@component
class Gate:
    """Holds ingestion open until the test creates `release` in `folder`, so a test decides who waits on whom."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        (self.folder / f"building-{os.getpid()}").touch()
        wait_for(lambda: (self.folder / "release").exists(), "the test to release the gate")
        return {"documents": documents}


def wait_for(condition, what, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.05)


def fast_spec(gate=None, *ingest):
    """Real splitting, spans and writing; LengthEmbedder for vectors; optionally a Gate before splitting, and
    `ingest` overrides (another ingest option)."""
    overrides = ["ingest.chunk_size=120", "ingest.chunk_overlap=0", *ingest]
    if gate is not None:
        overrides += [
            f"+ingest.splitters.gate={{_target_:tests.support.index_builds.Gate,folder:'{gate}'}}",
            "ingest.chain=[gate,recursive]",
        ]
    cfg = composed(*overrides)
    return ingest_spec(cfg.ingest, OmegaConf.create({"_target_": "tests.support.index_builds.LengthEmbedder"}))


def clean_build(tmp_path, spec):
    store = InMemoryDocumentStore()
    build_index(DOCS, spec, store, tmp_path / "clean", "fp")
    return chunk_records(store)
