import inspect
from typing import Any

import haystack.core.pipeline.base as pipeline_base
import haystack.core.pipeline.pipeline as pipeline_module
import pytest
from haystack import Document, component
from haystack.components.builders import PromptBuilder
from haystack.core.pipeline.utils import _deepcopy_with_exceptions

from pipelines import haystack_compat
from pipelines.builder import build_pipeline
from pipelines.errors import UserError
from pipelines.haystack_compat import (
    HaystackVersionError,
    check_haystack_version,
    fast_deepcopy,
    input_sockets,
    install_fast_copy,
    is_component,
    output_sockets,
)


@component
class Echo:
    @component.output_types(text=str, count=int)
    def run(self, text: str, times: int = 1) -> dict[str, Any]:
        return {"text": text * times, "count": times}


def test_sockets_are_the_run_parameters_and_declared_outputs():
    echo = Echo()
    assert is_component(echo) and not is_component(object())
    assert list(input_sockets(echo)) == [p for p in inspect.signature(Echo.run).parameters if p != "self"]
    assert input_sockets(echo)["times"].default_value == 1
    assert list(output_sockets(echo)) == ["text", "count"]
    assert output_sockets(echo)["count"].type is int


def test_sockets_include_those_a_component_sets_itself():
    builder = PromptBuilder(template="Hi {{ name }} in {{ place }}")
    named = {p for p in inspect.signature(PromptBuilder.run).parameters if p not in ("self", "kwargs")}
    assert set(input_sockets(builder)) == named | {"name", "place"}
    assert list(output_sockets(builder)) == ["prompt"]


def test_the_installed_haystack_is_the_tested_one():
    check_haystack_version()


def test_another_haystack_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(haystack_compat, "TESTED_HAYSTACK", "2.9")
    with pytest.raises(HaystackVersionError) as refused:
        check_haystack_version()
    message = str(refused.value)
    assert isinstance(refused.value, UserError) and "\n" not in message
    assert haystack_compat.haystack.__version__ in message and "2.9" in message
    with pytest.raises(HaystackVersionError):
        install_fast_copy()  # no patching of internals that may have moved


def test_installing_the_fast_copy_is_idempotent():
    install_fast_copy()
    install_fast_copy()
    assert pipeline_base._deepcopy_with_exceptions is fast_deepcopy
    assert pipeline_module._deepcopy_with_exceptions is fast_deepcopy


def test_building_a_pipeline_installs_the_fast_copy(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pipeline_base, "_deepcopy_with_exceptions", _deepcopy_with_exceptions)
    monkeypatch.setattr(pipeline_module, "_deepcopy_with_exceptions", _deepcopy_with_exceptions)
    built = build_pipeline({"components": {"echo": {"_target_": f"{__name__}.Echo"}}, "inputs": {"text": ["echo.text"]}})
    assert pipeline_module._deepcopy_with_exceptions is fast_deepcopy
    assert built.pipeline.run({"echo": {"text": "ab", "times": 2}}) == {"echo": {"text": "abab", "count": 2}}


def test_fast_copy_equals_haystacks_and_shares_no_mutables():
    doc = Document(id="a", content="x", meta={"span": [0, 1]}, embedding=[0.1, 0.2])
    value = {"embedding": [0.5] * 384, "docs": [doc], "nested": {"k": [1, "a", None, True]}, "t": (1, [2])}
    copied = fast_deepcopy(value)
    assert copied == _deepcopy_with_exceptions(value)
    assert copied["embedding"] is not value["embedding"]
    assert copied["docs"][0] is not doc and copied["docs"][0].meta["span"] is not doc.meta["span"]
    assert copied["nested"]["k"] is not value["nested"]["k"]
    assert copied["t"][1] is not value["t"][1]
