from haystack import Document
from haystack.core.pipeline.utils import _deepcopy_with_exceptions

from pipelines.fast_copy import fast_deepcopy


def test_same_result_as_haystack_and_no_shared_mutables():
    doc = Document(id="a", content="x", meta={"span": [0, 1]}, embedding=[0.1, 0.2])
    value = {"embedding": [0.5] * 384, "docs": [doc], "nested": {"k": [1, "a", None, True]}, "t": (1, [2])}
    copied = fast_deepcopy(value)
    assert copied == _deepcopy_with_exceptions(value)
    assert copied["embedding"] is not value["embedding"]
    assert copied["docs"][0] is not doc and copied["docs"][0].meta["span"] is not doc.meta["span"]
    assert copied["nested"]["k"] is not value["nested"]["k"]
    assert copied["t"][1] is not value["t"][1]
