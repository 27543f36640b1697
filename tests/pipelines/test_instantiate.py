import pytest

from pipelines.instantiate import locate
from pipelines.spec import PipelineConfigError


def test_an_unknown_target_still_names_its_key():
    with pytest.raises(PipelineConfigError, match="pipeline.components.x._target_: cannot import module"):
        locate("components.nothing_here.Cls", "pipeline.components.x")
