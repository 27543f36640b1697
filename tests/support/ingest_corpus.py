"""Two tenant documents, English and Chinese, and the index records ingestion tests compare."""

from haystack import Document

DOCS = [
    Document(id="en/a.md", content="# Leave\n\nAnnual leave is fifteen days. " * 20, meta={"doc_id": "en/a.md", "tenant": "t1"}),
    Document(id="zh/b.md", content="# 假期\n\n员工每年有十五天年假。" * 30, meta={"doc_id": "zh/b.md", "tenant": "t2"}),
]


def chunk_records(store):
    return sorted((d.to_dict() for d in store.filter_documents()), key=lambda r: r["id"])
