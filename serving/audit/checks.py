"""The audit's checks: whether a reply, a passage, an answer or an online route shows a principal anything of
a document it may not see, by a rule written here apart from the code it audits; and the report they count into."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from haystack import Document

from serving.principals import Principal

WINDOW = 30  # characters of an answer that, found only in documents the principal may not see, count as a leak
LAYERS = ("stages", "context", "citations", "steps", "answers", "replies")
# What only serve.py has: POST /feedback, GET /metrics and the online report over its traces.
ONLINE_LAYERS = ("feedback", "metrics", "report")
# serve.py's answer cache, probed with `ragtune audit --cache` (serving/audit/cache.py).
CACHE_LAYER = "cache"
# What a client can tell of a reply: its status, its body but for the request id, and its headers.
Seen = tuple[int, Any, dict[str, str]]
# A question or answer this long (as probes.sentences), found whole where others can read it, is a leak.
MIN_SAID = 20
# The audit's exit statuses, those of serving/cli.py (online-report's too).
EXIT_OK, EXIT_LEAK, EXIT_USER_ERROR = 0, 1, 2


def may_see(principal: Principal, meta: Mapping[str, Any]) -> bool:
    """The rule of serving/principals.py, restated plainly so the audit does not trust the code it audits."""
    tenant, acl = meta.get("tenant"), meta.get("acl")
    if tenant is None:
        return acl is None
    return tenant == principal.tenant and (acl is None or bool(set(acl) & set(principal.groups)))


@dataclass
class AuditReport:
    requests: Counter = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    checked: Counter = field(default_factory=Counter)
    leaks: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.unexpected or sum(self.leaks.values()))

    def lines(self) -> list[str]:
        width = max(len(kind) for kind in [*self.requests, "requests"]) + 4
        out = [f"{'requests':<{width}}{sum(self.requests.values()):>6}"]
        out += [f"  {kind:<{width - 2}}{count:>6}" for kind, count in sorted(self.requests.items())]
        out.append(f"{'layer':<{width}}{'checked':>8}{'cross-tenant':>14}")
        shown = [*LAYERS, *(layer for layer in (*ONLINE_LAYERS, CACHE_LAYER) if self.checked[layer])]
        out += [f"  {layer:<{width - 2}}{self.checked[layer]:>8}{self.leaks[layer]:>14}" for layer in shown]
        out += [f"unexpected status: {u}" for u in self.unexpected[:10]]
        out += [f"leak: {e}" for e in self.examples[:10]]
        out.append(f"{sum(self.leaks.values())} cross-tenant chunks, passages or side channels, "
                   f"{len(self.unexpected)} unexpected statuses")
        return out


@dataclass(frozen=True)
class Confidential:
    """What no online route may show, whoever reads it: WINDOW characters of any document, question asked or
    answer given, or a whole question or answer of at least MIN_SAID characters."""

    windows: frozenset[str]
    said: tuple[str, ...]

    @classmethod
    def of(cls, documents: Sequence[Document], said: Sequence[str]) -> Confidential:
        spoken = list(dict.fromkeys(_one_line(text) for text in said))  # each once: the oversized probes repeat
        texts = [*(_one_line(d.content or "") for d in documents), *spoken]
        return cls(frozenset(w for text in texts for w in _windows(text)),
                   tuple(text for text in spoken if len(text) >= MIN_SAID))

    def quoted(self, text: str) -> str | None:
        """The first piece of `text` that it holds; None when there is none."""
        text = _one_line(text)
        return next((w for w in _windows(text) if w in self.windows), None) or next(
            (said for said in self.said if said in text), None)


def check_reply(principal: Principal, reply: Mapping[str, Any], sources: Mapping[str, Document],
                texts: tuple[str, str], report: AuditReport, where: str) -> None:
    """Count every chunk the reply holds, by layer, and every one whose source document the principal may not see
    (a chunk that names no source document counts as a leak: nobody can vouch for it)."""
    def count(layer: str, references: Sequence[Mapping[str, Any]]) -> None:
        for reference in references:
            report.checked[layer] += 1
            source = sources.get(reference.get("doc_id") or "")
            if source is None or not may_see(principal, source.meta):
                report.leaks[layer] += 1
                owner = source.meta.get("tenant") if source else "unknown"
                report.examples.append(f"{where}: {layer} holds {reference.get('chunk_id')} of tenant {owner}")

    stages = reply.get("stages", {})
    count("stages", [r for view, refs in stages.items() if view != "context" for r in refs])
    count("context", stages.get("context", []) + list(reply.get("documents", [])))
    count("citations", reply.get("citations", []))
    hidden_ids = [doc_id for doc_id, doc in sources.items() if not may_see(principal, doc.meta)]
    check_text(json.dumps(reply, ensure_ascii=False), hidden_ids, report, where)
    for step in reply.get("steps", []):  # what an agent's tools returned, as streamed: passages it may see only
        check_quotes("steps", f"{step['tool']} returned {step['observation']}", texts, report, where)
    check_quotes("answers", reply.get("answer") or "", texts, report, where)


def check_quotes(layer: str, text: str, texts: tuple[str, str], report: AuditReport, where: str) -> None:
    """`text` must not quote WINDOW characters that only documents the principal may not see hold."""
    visible, hidden = texts
    text = _one_line(text)
    report.checked[layer] += bool(text)
    if any(w in hidden and w not in visible for w in _windows(text)):
        report.leaks[layer] += 1
        report.examples.append(f"{where}: the {layer} quote a document it may not see: {text[:120]!r}")


def check_text(text: str, hidden_ids: Sequence[str], report: AuditReport, where: str) -> None:
    """Any reply, a refusal too, must not name a document the principal may not see."""
    report.checked["replies"] += 1
    named = [doc_id for doc_id in hidden_ids if doc_id in text]
    if named:
        report.leaks["replies"] += 1
        report.examples.append(f"{where}: the reply names {named[0]}")


def check_disclosure(layer: str, text: str, names: Sequence[str], confidential: Confidential,
                     report: AuditReport, where: str) -> None:
    """`text`, shown beyond any one tenant, must name none of `names` and quote nothing `confidential`
    holds."""
    report.checked[layer] += 1
    found = next((name for name in names if name in text), None) or confidential.quoted(text)
    if found is not None:
        report.leaks[layer] += 1
        report.examples.append(f"{where}: shows {found[:120]!r}")


def compare_unknown(
    layer: str, seen: Seen, unknown: Seen, expected: int, report: AuditReport, where: str
) -> None:
    """A reply that must be the one something unknown gets: any difference tells the client what it may not
    know."""
    report.checked[layer] += 1
    if seen != unknown:
        report.leaks[layer] += 1
        headers = "" if seen[2] == unknown[2] else f" (headers {seen[2]} vs {unknown[2]})"
        report.examples.append(f"{where}: {seen[0]} {json.dumps(seen[1])[:80]} differs from the unknown "
                               f"one's {unknown[0]} {json.dumps(unknown[1])[:80]}{headers}")
    elif seen[0] != expected:
        report.unexpected.append(f"{where}: {seen[0]} (expected {expected}): {json.dumps(seen[1])[:160]}")


def texts_of(principal: Principal, documents: Sequence[Document]) -> tuple[str, str]:
    """All the text the principal may see, and all it may not, each run of whitespace as one space (as an agent's
    observation shows a passage)."""
    texts: dict[bool, list[str]] = {True: [], False: []}
    for document in documents:
        texts[may_see(principal, document.meta)].append(_one_line(document.content or ""))
    return "\n".join(texts[True]), "\n".join(texts[False])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _windows(text: str) -> set[str]:
    return {text[i:i + WINDOW] for i in range(max(len(text) - WINDOW + 1, 0))}
