"""A two-document handbook (annual leave, the London hotel limit) and a follow-up question about it."""

from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.datasets.golden.items import EvidenceSpan, GoldenItem

LEAVE = "Full-time employees accrue 20 days of paid annual leave per calendar year."
HOTEL = "The nightly hotel limit is $310 in London."


def store():
    docs = [
        Document(id="leave#0-75", content=LEAVE, meta={"doc_id": "leave", "span": [0, len(LEAVE)]}),
        Document(id="travel#0-42", content=HOTEL, meta={"doc_id": "travel", "span": [0, len(HOTEL)]}),
    ]
    memory = InMemoryDocumentStore()
    memory.write_documents(docs)
    return memory, {"leave": [docs[0]], "travel": [docs[1]]}


def follow_up():
    """An elliptical follow-up: only the history says what 'it' is."""
    return GoldenItem(id="f1", question="And what is the limit in London?", reference_answer="$310",
                      evidence=(HOTEL,), evidence_spans=((EvidenceSpan("travel", 0, len(HOTEL)),),),
                      history=({"role": "user", "content": "Is there a nightly hotel limit?"},
                               {"role": "assistant", "content": "Yes, it depends on the city."}))
