"""The metrics a job logs about itself (time, index, dataset), declared apart from the runner that logs them, so
that reading the metric catalog (`ragtune gate`, `compare`) does not import the whole job runner."""

from __future__ import annotations

from experiments.evaluation.metric_registry import Direction, Layer, declare

INDEX_SECONDS = declare("time/index_seconds", Layer.RUN, Direction.NEITHER,
                        "building or loading the index, with the warm-up of the components that read it")
MODEL_LOAD_SECONDS = declare("time/model_load_seconds", Layer.RUN, Direction.NEITHER,
                             "warming up the other components (loading their models)")
EVAL_SECONDS = declare("time/eval_seconds", Layer.RUN, Direction.NEITHER,
                       "answering and scoring the golden set")
CACHE_HIT = declare("index/cache_hit", Layer.RUN, Direction.NEITHER,
                    "1 when the index came from the snapshot cache")
CHUNKS = declare("index/chunks", Layer.RUN, Direction.NEITHER, "chunks in the index")
declare("index/{reused,ingested,removed}_documents", Layer.RUN, Direction.NEITHER,
        "after an incremental update of an earlier index: the documents kept, split and embedded again, and "
        "dropped ([pipelines](pipelines.md#ingestion-and-the-index-cache))")
SKIPPED_FILES = declare("dataset/skipped_files", Layer.RUN, Direction.NEITHER,
                        "corpus files that could not be converted and were not indexed, each with its reason in "
                        "`skipped_files.json` ([datasets](datasets.md#local-corpora))")
