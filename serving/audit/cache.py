"""The audit's cache probe (`ragtune audit --cache`): the same question asked by every principal in turn, then
the next question in the reverse order, on serve.py with serve.cache on.

Each principal asks once per question: the demo's keys, and each key's twin (another user of the same tenant and
groups, which ServeChannel adds). Every reply is checked as any probe's (serving.audit.checks), and against what
the cache may do, by the audit's own rule of who shares an entry (the same tenant and the same set of groups,
whatever their order): the first of a scope to ask is answered by the pipeline, the next of that scope (asking
with other case and spacing) from the cache, with the very reply the first got. A hit for a scope nobody of it
asked yet, or a hit unlike its scope's first reply, is a leak; so is a trace id given twice, or a twin's rating
of the trace id its reply was first given for that differs from an unknown id's 404. Streams and plain replies
alternate by question; a plain reply's `X-Ragtune-Cache` header must say what its `cached` says.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from haystack import Document

from serving.audit.channels import ServeChannel
from serving.audit.checks import CACHE_LAYER, AuditReport, check_reply, compare_unknown, texts_of
from serving.audit.online import seen
from serving.audit.probes import Probe, sentences
from serving.http.routes import CACHE_HEADER
from serving.principals import Principal

# What a hit must repeat of its scope's first reply.
SHARED = ("answer", "refused", "citations", "documents", "stages")
Scope = tuple[str, frozenset[str]]


def cache_questions(documents: Sequence[Document], questions: Sequence[str]) -> list[str]:
    """`questions` (asked by no other probe, so the cache holds none of them yet) and a sentence of one document
    of each tenant, the strongest pull to its passages, marked so that no other probe asks it either."""
    tenants = sorted({d.meta["tenant"] for d in documents if d.meta.get("tenant")})
    pulls = [
        next(s for d in documents if d.meta.get("tenant") == t for s in sentences(d.content or ""))
        for t in tenants
    ]
    return [*questions, *(f"{pull} ({CACHE_LAYER} probe)" for pull in pulls)]


def audit_cache(
    channel: ServeChannel,
    keys: Mapping[str, Principal],
    documents: Sequence[Document],
    questions: Sequence[str],
    report: AuditReport,
) -> list[str]:
    """Asks each of `questions` as every principal in turn (the reverse order for every other question) and
    checks each reply as the module says; returns what was said (questions and answers), which the online
    routes must not show."""
    principals = {key: p for key, p in {**keys, **channel.twins}.items() if not p.admin}
    sources = {document.id: document for document in documents}
    texts = {key: texts_of(principal, documents) for key, principal in principals.items()}
    given: dict[str, str] = {}  # trace id -> who was given it
    said = list(questions)
    for number, question in enumerate(questions):
        order = list(principals) if number % 2 == 0 else list(principals)[::-1]
        first: dict[Scope, tuple[str, dict[str, Any]]] = {}
        for key in order:
            principal = principals[key]
            scope = (principal.tenant, frozenset(principal.groups))
            asked = question if scope not in first else f"  {question.swapcase()} "
            where = f"cache #{number} as {key}"
            status, reply = _ask(channel, key, asked, streamed=number % 2 == 0, report=report, where=where)
            report.requests[f"serve/{CACHE_LAYER}"] += 1
            if status != 200:
                report.unexpected.append(f"{where}: {status} (expected 200): {str(reply)[:160]}")
                continue
            check_reply(principal, reply, sources, texts[key], report, where)
            _check_entry(reply, first.get(scope), where, report)
            _check_trace(channel, key, reply, given, first.get(scope), where, report)
            first.setdefault(scope, (key, reply))
            said.append(reply.get("answer") or "")
    return said


def _ask(
    channel: ServeChannel, key: str, question: str, streamed: bool, report: AuditReport, where: str
) -> tuple[int, Any]:
    """A streamed or a plain reply; a plain one's cache header must agree with its `cached`."""
    if streamed:
        return channel.send(Probe(CACHE_LAYER, key, {"question": question}))
    response = channel.call("POST", "/query", key, {"question": question})
    reply = response.json()
    if response.status_code == 200 and response.headers.get(CACHE_HEADER) != (
        "hit" if reply.get("cached") else "miss"
    ):
        report.unexpected.append(
            f"{where}: {CACHE_HEADER} {response.headers.get(CACHE_HEADER)} with cached {reply.get('cached')}"
        )
    return response.status_code, reply


def _check_entry(
    reply: Mapping[str, Any], first: tuple[str, dict[str, Any]] | None, where: str, report: AuditReport
) -> None:
    """A hit only where its scope asked first, with the reply its scope got; a miss where it did is a cache
    that does not work (unexpected, not a leak)."""
    report.checked[CACHE_LAYER] += 1
    hit = reply.get("cached") is True
    if first is None:
        if hit:
            report.leaks[CACHE_LAYER] += 1
            report.examples.append(f"{where}: a cached reply, though no principal of its scope asked before")
        return
    filler, filled = first
    if not hit:
        report.unexpected.append(f"{where}: answered again, though {filler} of its scope asked before")
    elif any(reply.get(field) != filled.get(field) for field in SHARED):
        report.leaks[CACHE_LAYER] += 1
        report.examples.append(f"{where}: a cached reply unlike the one its scope got first ({filler})")


def _check_trace(
    channel: ServeChannel,
    key: str,
    reply: Mapping[str, Any],
    given: dict[str, str],
    first: tuple[str, dict[str, Any]] | None,
    where: str,
    report: AuditReport,
) -> None:
    """Each reply its own trace id; where traces are kept, rating the trace id of its scope's first reply
    (another principal's) must get the very reply an unknown id gets."""
    trace_id = reply["trace_id"]
    report.checked[CACHE_LAYER] += 1
    if trace_id in given:
        report.leaks[CACHE_LAYER] += 1
        report.examples.append(f"{where}: trace id {trace_id} was given to {given[trace_id]} already")
    given[trace_id] = key
    if channel.traces is None or first is None:
        return
    theirs, unknown = (
        seen(channel.call("POST", "/feedback", key, {"trace_id": t, "rating": 1}))
        for t in (first[1]["trace_id"], f"tr-{secrets.token_hex(16)}")
    )
    report.requests["serve/feedback"] += 2
    compare_unknown(CACHE_LAYER, theirs, unknown, 404, report, f"{where}: rating {first[0]}'s trace")
