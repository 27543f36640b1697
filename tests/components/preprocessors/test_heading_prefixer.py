import pytest
from haystack import Document

from components.preprocessors.heading_prefixer import HeadingPrefixer


def chunk(content: str, heading_path: list[str] | None) -> Document:
    meta = {"doc_id": "d", "span": [10, 10 + len(content)], "tenant": "acme"}
    if heading_path is not None:
        meta["heading_path"] = heading_path
    return Document(id=f"d#10-{10 + len(content)}", content=content, meta=meta)


def test_prefixes_heading_path_and_keeps_id_and_meta():
    original = chunk("安装很简单。", ["Guide", "安装", "配置"])

    (out,) = HeadingPrefixer().run([original])["documents"]

    assert out.content == "Guide > 安装 > 配置\n安装很简单。"
    assert out.id == original.id
    assert out.meta == original.meta
    assert original.content == "安装很简单。"


def test_no_prefix_without_heading_path():
    docs = [chunk("plain", []), chunk("no key", None)]
    assert [d.content for d in HeadingPrefixer().run(docs)["documents"]] == ["plain", "no key"]


@pytest.mark.parametrize("content", ["## 配置\n\nbody", "\n### 配置\nbody", "配置\nbody"])
def test_no_prefix_when_chunk_opens_with_its_heading(content):
    (out,) = HeadingPrefixer().run([chunk(content, ["Guide", "配置"])])["documents"]
    assert out.content == content


def test_heading_text_elsewhere_still_gets_prefix():
    (out,) = HeadingPrefixer().run([chunk("## 配置项\nbody", ["配置"])])["documents"]
    assert out.content == "配置\n## 配置项\nbody"


def test_custom_separator():
    (out,) = HeadingPrefixer(separator=" / ").run([chunk("body", ["A", "B"])])["documents"]
    assert out.content == "A / B\nbody"


def test_disabled_returns_input_unchanged():
    docs = [chunk("body", ["A", "B"])]
    assert HeadingPrefixer(enabled=False).run(docs)["documents"] is docs


def test_separator_with_newline_rejected():
    with pytest.raises(ValueError, match="separator"):
        HeadingPrefixer(separator="\n")


def test_serialization_round_trip():
    data = HeadingPrefixer(enabled=False, separator=" / ").to_dict()
    assert data == {
        "type": "components.preprocessors.heading_prefixer.HeadingPrefixer",
        "init_parameters": {"enabled": False, "separator": " / "},
    }
    restored = HeadingPrefixer.from_dict(data)
    assert (restored.enabled, restored.separator) == (False, " / ")
