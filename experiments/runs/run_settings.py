"""One run's settings as typed records: what `validate(cfg)` returns and what the runner hands down.

A DictConfig stops at the Hydra boundary (run.py, the sweeper, a bundle's config.yaml read back); below it code
reads these records. The component sections a pipeline interpolates (`answer`, `reranker`, `rewriter`, `router`,
…) are `_target_` + params, plain data that pipelines/instantiate.py builds: `section()` gives one resolved, when
it is read (resolving one may load a model that a run without it never needs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.datasets.settings import DatasetSettings
from experiments.evaluation.settings import EvalSettings
from experiments.runs.model_settings import ModelsSettings
from experiments.runs.settings import (
    CragSettings,
    IngestSettings,
    MlflowSettings,
    RetrieverSettings,
    SelfCheckSettings,
    StoreSettings,
)
from pipelines.spec import PipelineSpec


@dataclass(frozen=True)
class RunSettings:
    dataset: DatasetSettings
    retriever: RetrieverSettings
    eval: EvalSettings
    ingest: IngestSettings
    selfcheck: SelfCheckSettings
    models: ModelsSettings
    crag: CragSettings
    store: StoreSettings
    mlflow: MlflowSettings
    pipeline: PipelineSpec
    # The metric run.py returns to a sweeper (`objective`).
    objective: str
    # paths.cache: index snapshots and downloaded data sets.
    cache: Path
    # The composed config, read only through `section()`.
    config: DictConfig = field(repr=False, compare=False)

    def section(self, dotted: str) -> Any:
        """A section by its dotted key (`answer`, `router.llm`) as plain resolved data; None when absent."""
        value = OmegaConf.select(self.config, dotted)
        return OmegaConf.to_container(value, resolve=True, enum_to_str=True) if OmegaConf.is_config(value) else value
