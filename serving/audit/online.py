"""What only serve.py has, audited after the probes: POST /feedback on the trace ids they got, /metrics, and
the online report over the traces they left."""

from __future__ import annotations

import contextlib
import io
import json
import secrets
from collections.abc import Mapping

import httpx
import mlflow

from pipelines.errors import UserError
from serving.audit.channels import MODEL, ServeChannel
from serving.audit.checks import EXIT_OK, AuditReport, Confidential, Seen, check_disclosure, compare_unknown
from serving.audit.probes import INVALID_KEY
from serving.online import report as online_report
from serving.online.feedback import FEEDBACK_NAME
from serving.online.traces import ANONYMOUS
from serving.principals import Principal

# The figures the online report may give per tenant.
TENANT_FIGURES = {"requests", "rated", "satisfaction", "refusal_rate"}
OWNER_RATING = -1  # the owner's rating; every other principal sends 1, so a 1 on a trace is theirs
DRAIN_SECONDS = 120.0  # how long the audit waits for its traces and ratings to reach the store


def audit_online(channel: ServeChannel, keys: Mapping[str, Principal], owned: Mapping[str, str],
                 confidential: Confidential, report: AuditReport) -> None:
    """serve.py's own routes, after the probes: POST /feedback on the trace ids they got, GET /metrics, and
    the online report over the traces they left."""
    audit_feedback(channel, keys, owned, report)
    audit_metrics(channel, keys, confidential, report)
    audit_report(channel, keys, confidential, report)


def audit_feedback(channel: ServeChannel, keys: Mapping[str, Principal], owned: Mapping[str, str],
                   report: AuditReport) -> None:
    """Only the key that asked may rate its reply, and no one else can tell its trace id from an unknown one:
    every other principal's rating of it gets the very reply an unknown id gets (status, body but for the
    request id, headers), before and after the owner's own rating (202). Only the owner's rating may reach the
    trace."""
    unknown = f"tr-{secrets.token_hex(16)}"
    raters = [*keys, INVALID_KEY, None]
    for owner, trace_id in owned.items():
        for after in (False, True):
            if after:
                rating = {"trace_id": trace_id, "rating": OWNER_RATING}
                rated = channel.call("POST", "/feedback", owner, rating)
                report.requests["serve/feedback"] += 1
                if rated.status_code != 202:
                    report.unexpected.append(f"serve feedback as {owner} on its own trace: "
                                             f"{rated.status_code} (expected 202): {rated.text[:160]}")
            for rater in (r for r in raters if r != owner):
                theirs, unknowns = (
                    seen(channel.call("POST", "/feedback", rater, {"trace_id": t, "rating": 1}))
                    for t in (trace_id, unknown)
                )
                report.requests["serve/feedback"] += 2
                where = f"serve feedback as {rater} on {owner}'s trace{' after its rating' if after else ''}"
                expected = 404 if rater in keys else 401
                compare_unknown("feedback", theirs, unknowns, expected, report, where)
    channel.traces.drain(DRAIN_SECONDS)
    client = mlflow.MlflowClient(channel.uri)
    for owner, trace_id in owned.items():
        ratings = [a.value for a in client.get_trace(trace_id).info.assessments
                   if a.name == FEEDBACK_NAME and a.valid is not False]
        report.checked["feedback"] += 1
        if any(rating != OWNER_RATING for rating in ratings):
            report.leaks["feedback"] += 1
            report.examples.append(f"serve feedback: {owner}'s trace holds a rating another principal sent: "
                                   f"{ratings}")


def audit_metrics(channel: ServeChannel, keys: Mapping[str, Principal], confidential: Confidential,
                  report: AuditReport) -> None:
    """Off loopback, /metrics is an unknown path (any method) to all but an admin key; what it shows an admin
    names no tenant and quotes nothing asked, answered or held in a document."""
    unknown_path = f"/{secrets.token_hex(8)}"
    for key in [*(k for k, p in keys.items() if not p.admin), INVALID_KEY, None]:
        for method in ("GET", "POST"):
            metrics, unknown = (seen(channel.call(method, path, key)) for path in ("/metrics", unknown_path))
            report.requests["serve/metrics"] += 2
            compare_unknown("metrics", metrics, unknown, 404, report, f"serve {method} /metrics as {key}")
    tenants = sorted({p.tenant for p in keys.values()})
    for admin in (k for k, p in keys.items() if p.admin):
        scrape = channel.call("GET", "/metrics", admin)
        report.requests["serve/metrics"] += 1
        if scrape.status_code != 200:
            report.unexpected.append(f"serve GET /metrics as the admin {admin}: {scrape.status_code} "
                                     "(expected 200)")
            continue
        where = "serve GET /metrics as the admin"
        check_disclosure("metrics", scrape.text, tenants, confidential, report, where)


def audit_report(channel: ServeChannel, keys: Mapping[str, Principal], confidential: Confidential,
                 report: AuditReport) -> None:
    """`ragtune online-report` over the audit's traces, as the local CLI runs it: what it writes and prints
    quotes no question, answer or document, and per tenant (the audit's own) it gives counts and rates
    only."""
    channel.traces.drain(DRAIN_SECONDS)
    out, printed = channel.folder / "online-report", io.StringIO()
    report.requests["serve/report"] += 1
    try:
        with contextlib.redirect_stdout(printed):
            status = online_report.main([MODEL, "--tracking-uri", channel.uri, "--out", str(out), "--json"])
    except UserError as e:
        report.unexpected.append(f"serve online-report: {e}")
        return
    if status != EXIT_OK:
        report.unexpected.append(f"serve online-report: exit {status} (expected {EXIT_OK})")
    written = {name: (out / name).read_text(encoding="utf-8") for name in ("report.md", "report.json")}
    for name, text in (*written.items(), ("--json", printed.getvalue())):
        check_disclosure("report", text, (), confidential, report, f"serve online-report {name}")
    tenants = {p.tenant for p in keys.values()} | {ANONYMOUS}
    for variant, figures in json.loads(written["report.json"])["variants"].items():
        for tenant, shown in figures["tenants"].items():
            report.checked["report"] += 1
            if tenant not in tenants or set(shown) != TENANT_FIGURES or not all(
                    value is None or isinstance(value, int | float) for value in shown.values()):
                report.leaks["report"] += 1
                report.examples.append(f"serve online-report: variant {variant} shows tenant {tenant[:80]!r}"
                                       f" as {json.dumps(shown)[:120]}, not counts and rates of a tenant of "
                                       "the audit")


def seen(response: httpx.Response) -> Seen:
    """What a client can tell of a reply: its status, its body but for the request id (new each time), and its
    headers."""
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict):
        body.pop("request_id", None)
    return response.status_code, body, dict(response.headers)
