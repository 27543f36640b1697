import pytest

from experiments.runs.config import validate
from experiments.runs.indexed import prepare_pipeline
from serving.served_pipeline import ServedPipeline
from tests.support.shipped import composed


@pytest.fixture(scope="module")
def bm25(tmp_path_factory: pytest.TempPathFactory) -> ServedPipeline:
    """BM25 and the extractive answerer over the demo corpus: the cheap offline pipeline, indexed once a module."""
    cache = tmp_path_factory.mktemp("cache")
    cfg = composed("pipeline=bm25", "answer=extractive", "+pipeline.answer=${answer.stage}", f"paths.cache={cache}")
    return ServedPipeline.warm(prepare_pipeline(validate(cfg)))
