"""`ragtune online-report MODEL [--since 7d] [--json] [--out DIR]`: how each served variant of a model fares in
production, from its traces (serving.online.traces) and its users' ratings (serving.online.feedback).

Per variant: requests, satisfaction with a Wilson CI, refusal rate, latency p50/p95 and the reference-free quality
tags; per tenant, counts and rates only (never questions). Each challenger is compared with the champion: paired
(experiments.comparison.significance) over the requests both answered (shadow pairs, by request id), else a
two-proportion z-test. It exits 1 when a challenger is significantly worse (the CI of the difference below 0), so
it can gate a rollout.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
from mlflow.entities import Assessment, Trace
from scipy import stats

from experiments.comparison.significance import paired
from experiments.runs.cache import duration
from experiments.runs.tracking import TRACKING_HELP, connect
from pipelines.errors import UserError
from pipelines.run_layout import (
    TRACE_LATENCY_TAG,
    TRACE_REFUSED_TAG,
    TRACE_REQUEST_ID_TAG,
    TRACE_TENANT_TAG,
    TRACE_VARIANT_TAG,
    quality_tag,
)
from serving.online.feedback import FEEDBACK_NAME
from serving.online.traces import experiment_name

REPORT_EXPERIMENT = "ragtune-online-report"
CHAMPION, PRODUCTION = "champion", "production"
QUALITY = ("citation_accuracy", "unsupported_sentence_rate", "top_score")
CONFIDENCE = 0.95
PAGE = 500
MODEL_HELP = "the registered model's name (as in models:/NAME@ALIAS)"


@dataclass
class Served:
    """One trace, as the report reads it: only tags and the rating, never its text."""

    variant: str
    request_id: str
    tenant: str
    refused: bool
    latency_ms: float | None
    quality: dict[str, float]
    satisfied: bool | None  # None: not rated


@dataclass
class Rate:
    rate: float | None
    low: float | None
    high: float | None
    n: int


@dataclass
class VariantFigures:
    requests: int
    rated: int
    satisfaction: Rate
    refusal_rate: float
    latency_ms: dict[str, float | None]
    quality: dict[str, float | None]
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Comparison:
    champion: str
    challenger: str
    test: str  # "paired" (shadow pairs) or "two-proportion"
    n: int
    difference: float | None
    ci: tuple[float | None, float | None]
    p_value: float | None
    # Shadow pairs (the same request answered by both): paired reference-free figures, challenger minus champion,
    # as {figure: {n, difference, ci, p_value}}; a shadow's answers are never shown, so never rated.
    quality: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def worse(self) -> bool:
        """Significantly less satisfying, or, over shadow pairs, significantly more refusals or unsupported
        sentences, or less citation accuracy."""
        if self.ci[1] is not None and self.ci[1] < 0:
            return True
        return any(_beyond(figures["ci"], WORSE_WHEN[name]) for name, figures in self.quality.items())


# How a paired reference-free figure is worse: up (+1) or down (-1). top_score describes retrieval, not quality.
WORSE_WHEN = {"refused": 1, "citation_accuracy": -1, "unsupported_sentence_rate": 1}


def _beyond(ci: Sequence[float | None], direction: int) -> bool:
    low, high = ci
    return (low is not None and low > 0) if direction > 0 else (high is not None and high < 0)


def satisfied(value: Any, scale: int) -> bool:
    """A rating of 1 on scale 2, or 4 and up on scale 5, is a satisfied user."""
    return value == 1 if scale == 2 else value >= 4


def rating_of(trace: Trace) -> Assessment | None:
    """The user's rating of a trace: the latest valid one (rating again replaces the earlier one)."""
    ratings = [a for a in trace.info.assessments if a.name == FEEDBACK_NAME and a.valid is not False]
    return max(ratings, key=lambda a: a.create_time_ms, default=None)


def rated_satisfied(rating: Assessment) -> bool:
    return satisfied(rating.feedback.value, int((rating.metadata or {}).get("scale", 2)))


def read(trace: Trace) -> Served:
    tags = trace.info.tags
    rating = rating_of(trace)
    return Served(
        variant=tags.get(TRACE_VARIANT_TAG, CHAMPION),
        request_id=tags.get(TRACE_REQUEST_ID_TAG, trace.info.trace_id),
        tenant=tags.get(TRACE_TENANT_TAG, "anonymous"),
        refused=tags.get(TRACE_REFUSED_TAG) == "true",
        latency_ms=_number(tags.get(TRACE_LATENCY_TAG)),
        quality={name: v for name in QUALITY if (v := _number(tags.get(quality_tag(name)))) is not None},
        satisfied=None if rating is None else rated_satisfied(rating),
    )


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def traces_since(experiment_id: str, since_ms: int) -> Iterator[Trace]:
    client, token = mlflow.MlflowClient(), None
    while True:
        page = client.search_traces(locations=[experiment_id], filter_string=f"timestamp_ms > {since_ms}",
                                    max_results=PAGE, page_token=token, include_spans=False)
        yield from page
        token = page.token
        if not token:
            return


def wilson(successes: int, n: int) -> Rate:
    if n == 0:
        return Rate(None, None, None, 0)
    ci = stats.binomtest(successes, n).proportion_ci(CONFIDENCE, method="wilson")
    return Rate(successes / n, float(ci.low), float(ci.high), n)


def figures(served: list[Served]) -> VariantFigures:
    ratings = [s.satisfied for s in served if s.satisfied is not None]
    latency = [s.latency_ms for s in served if s.latency_ms is not None]
    return VariantFigures(
        requests=len(served), rated=len(ratings), satisfaction=wilson(sum(ratings), len(ratings)),
        refusal_rate=sum(s.refused for s in served) / len(served),
        latency_ms={f"p{q}": float(np.percentile(latency, q)) if latency else None for q in (50, 95)},
        quality={name: _mean([s.quality[name] for s in served if name in s.quality]) for name in QUALITY},
    )


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def per_tenant(served: list[Served]) -> dict[str, dict[str, Any]]:
    """Counts and rates per tenant: aggregates only, for the local CLI."""
    tenants = sorted({s.tenant for s in served})
    out = {}
    for tenant in tenants:
        mine = figures([s for s in served if s.tenant == tenant])
        out[tenant] = {"requests": mine.requests, "rated": mine.rated, "satisfaction": mine.satisfaction.rate,
                       "refusal_rate": mine.refusal_rate}
    return out


def champion_of(model: str, counts: dict[str, int]) -> tuple[str, str]:
    """(the champion variant, the rule that chose it): `champion` if served, else `production` if that alias of the
    registered model was served, else the variant with most requests."""
    if CHAMPION in counts:
        return CHAMPION, f"the variant named {CHAMPION!r}"
    if PRODUCTION in counts and PRODUCTION in _aliases(model):
        return PRODUCTION, f"the registered model's alias {PRODUCTION!r}"
    busiest = max(sorted(counts), key=counts.__getitem__)
    return busiest, "the variant with most requests"


def _aliases(model: str) -> set[str]:
    try:
        return set(mlflow.MlflowClient().get_registered_model(model).aliases)
    except mlflow.exceptions.MlflowException:
        return set()


def compare(champion: str, challenger: str, served: list[Served]) -> Comparison:
    """Challenger minus champion satisfaction: paired over the request ids both rated (shadow pairs) when there are
    any, else a two-proportion z-test over all rated requests."""
    rated = {v: {s.request_id: float(s.satisfied) for s in served if s.variant == v and s.satisfied is not None}
             for v in (champion, challenger)}
    quality = shadow_pairs(champion, challenger, served)
    shared = sorted(rated[champion].keys() & rated[challenger].keys())
    if shared:
        pair = paired("satisfaction", [rated[champion][r] for r in shared], [rated[challenger][r] for r in shared],
                      CONFIDENCE)
        return Comparison(champion, challenger, "paired", pair.n, pair.diff, (pair.low, pair.high), pair.p_value,
                          quality)
    a, b = list(rated[champion].values()), list(rated[challenger].values())
    if not a or not b:
        return Comparison(champion, challenger, "two-proportion", len(a) + len(b), None, (None, None), None, quality)
    return replace(two_proportions(champion, challenger, a, b), quality=quality)


def shadow_pairs(champion: str, challenger: str, served: list[Served]) -> dict[str, dict[str, Any]]:
    """Paired refusal rate and reference-free quality over the requests both variants answered (a shadow's), by
    request id; empty when they share none."""
    by_id = {v: {s.request_id: s for s in served if s.variant == v} for v in (champion, challenger)}
    shared = sorted(by_id[champion].keys() & by_id[challenger].keys())
    out: dict[str, dict[str, Any]] = {}
    for name in WORSE_WHEN:
        pairs = [(x, y) for r in shared if (x := _figure(by_id[champion][r], name)) is not None
                 and (y := _figure(by_id[challenger][r], name)) is not None]
        if pairs:
            pair = paired(name, [a for a, _ in pairs], [b for _, b in pairs], CONFIDENCE)
            out[name] = {"n": pair.n, "difference": pair.diff, "ci": [pair.low, pair.high], "p_value": pair.p_value}
    return out


def _figure(served: Served, name: str) -> float | None:
    return float(served.refused) if name == "refused" else served.quality.get(name)


def two_proportions(champion: str, challenger: str, a: list[float], b: list[float]) -> Comparison:
    """Wald CI of the difference and the pooled z-test's two-sided p-value."""
    pa, pb = float(np.mean(a)), float(np.mean(b))
    diff, z = pb - pa, float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    half = z * math.sqrt(pa * (1 - pa) / len(a) + pb * (1 - pb) / len(b))
    pooled = (sum(a) + sum(b)) / (len(a) + len(b))
    spread = math.sqrt(pooled * (1 - pooled) * (1 / len(a) + 1 / len(b)))
    p_value = float(2 * stats.norm.sf(abs(diff) / spread)) if spread > 0 else 1.0
    return Comparison(champion, challenger, "two-proportion", len(a) + len(b), diff, (diff - half, diff + half),
                      p_value)


def as_json(model: str, since: str, champion: str, rule: str, variants: dict[str, VariantFigures],
            comparisons: list[Comparison]) -> dict[str, Any]:
    return {
        "model": model, "since": since, "champion": champion, "champion_rule": rule,
        "variants": {name: asdict(v) for name, v in variants.items()},
        "comparisons": {c.challenger: asdict(c) | {"ci": list(c.ci), "worse": c.worse} for c in comparisons},
    }


def markdown(report: dict[str, Any], plots: list[Path]) -> str:
    def fmt(value: float | None, digits: int = 3) -> str:
        return "n/a" if value is None else f"{value:.{digits}f}"

    lines = [f"# Online report: {report['model']} (last {report['since']})", "",
             f"Champion: **{report['champion']}** ({report['champion_rule']}).", "",
             "| variant | requests | rated | satisfaction [95% CI] | refusal rate | latency p50 / p95 ms | "
             + " | ".join(QUALITY) + " |", "|" + "---|" * (6 + len(QUALITY))]
    for name, v in report["variants"].items():
        s = v["satisfaction"]
        lines.append(f"| {name} | {v['requests']} | {v['rated']} | {fmt(s['rate'])} [{fmt(s['low'])}, "
                     f"{fmt(s['high'])}] | {fmt(v['refusal_rate'])} | {fmt(v['latency_ms']['p50'], 1)} / "
                     f"{fmt(v['latency_ms']['p95'], 1)} | " + " | ".join(fmt(v["quality"][q]) for q in QUALITY) + " |")
    lines += ["", "## Challenger vs champion (satisfaction, challenger minus champion)", ""]
    for name, c in report["comparisons"].items():
        verdict = "significantly worse" if c["worse"] else "not significantly worse"
        lines.append(f"- **{name}** vs {c['champion']} ({c['test']}, n={c['n']}): difference {fmt(c['difference'])}, "
                     f"95% CI [{fmt(c['ci'][0])}, {fmt(c['ci'][1])}], p={fmt(c['p_value'])}: {verdict}")
        for figure, q in c["quality"].items():
            lines.append(f"  - {figure}, paired over {q['n']} shadow pairs: difference {fmt(q['difference'])}, "
                         f"95% CI [{fmt(q['ci'][0])}, {fmt(q['ci'][1])}], p={fmt(q['p_value'])}")
    lines += ["", "## Per tenant (counts and rates only)", "", "| variant | tenant | requests | rated | "
              "satisfaction | refusal rate |", "|---|---|---|---|---|---|"]
    for name, v in report["variants"].items():
        for tenant, t in v["tenants"].items():
            lines.append(f"| {name} | {tenant} | {t['requests']} | {t['rated']} | {fmt(t['satisfaction'])} | "
                         f"{fmt(t['refusal_rate'])} |")
    lines += ["", *[f"![{p.stem}]({p.name})" for p in plots], ""]
    return "\n".join(lines)


def log_run(model: str, report: dict[str, Any], out: Path) -> str:
    """The report as an MLflow run: its figures as metrics, its files as artifacts."""
    metrics = {}
    for name, v in report["variants"].items():
        flat = {"requests": v["requests"], "satisfaction": v["satisfaction"]["rate"],
                "refusal_rate": v["refusal_rate"], **{f"latency_{k}_ms": x for k, x in v["latency_ms"].items()},
                **v["quality"]}
        metrics |= {f"{name}/{k}": float(x) for k, x in flat.items() if x is not None}
    for name, c in report["comparisons"].items():
        metrics |= {f"{name}/difference": c["difference"], f"{name}/p_value": c["p_value"]}
    found = mlflow.get_experiment_by_name(REPORT_EXPERIMENT)
    experiment_id = found.experiment_id if found else mlflow.create_experiment(REPORT_EXPERIMENT)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"{model}-{report['since']}") as run:
        mlflow.log_params({"model": model, "since": report["since"], "champion": report["champion"]})
        mlflow.log_metrics({k: v for k, v in metrics.items() if v is not None})
        mlflow.log_artifacts(str(out))
    return run.info.run_id


def served_experiment(model: str, experiment: str | None) -> tuple[str, str]:
    """(id, name) of the experiment holding the served model's traces; a UserError when there is none."""
    name = experiment_name(f"models:/{model}", experiment)
    found = mlflow.MlflowClient().get_experiment_by_name(name)
    if found is None:
        raise UserError(f"no traces of model {model!r}: experiment {name!r} does not exist (was it served with "
                        "serve.trace on?)")
    return found.experiment_id, name


def build(model: str, experiment: str | None, since: str, window_ms: int) -> dict[str, Any]:
    """The report's figures; a UserError when the model has no traces in the window."""
    experiment_id, name = served_experiment(model, experiment)
    served = [read(t) for t in traces_since(experiment_id, int(time.time() * 1000) - window_ms)]
    if not served:
        raise UserError(f"no traces of model {model!r} in the last {since} (experiment {name!r})")
    by_variant = {v: [s for s in served if s.variant == v] for v in sorted({s.variant for s in served})}
    variants = {v: figures(group) for v, group in by_variant.items()}
    for v, group in by_variant.items():
        variants[v].tenants = per_tenant(group)
    champion, rule = champion_of(model, {v: f.requests for v, f in variants.items()})
    variants = {champion: variants.pop(champion)} | variants  # listed first
    comparisons = [compare(champion, v, served) for v in variants if v != champion]
    return as_json(model, since, champion, rule, variants, comparisons)


def model_window_arguments(parser: argparse.ArgumentParser) -> None:
    """--since, --experiment and --tracking-uri: where a served model's traces are, as its commands take them."""
    parser.add_argument("--since", default="7d", help="the window, e.g. 24h, 7d (default 7d)")
    parser.add_argument("--experiment", help="the traces' experiment, if serve.trace_experiment named one")
    parser.add_argument("--tracking-uri", help=TRACKING_HELP)


def window_ms(parser: argparse.ArgumentParser, since: str) -> int:
    """--since in milliseconds; argparse's one-line error (exit 2) when it is no duration."""
    try:
        return int(duration(since).total_seconds() * 1000)
    except argparse.ArgumentTypeError as e:
        parser.error(f"--since: {e}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="How a served model's variants fare in production; exit 1 when "
                                     "a challenger is significantly less satisfying than the champion.")
    parser.add_argument("model", help=MODEL_HELP)
    model_window_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--out", type=Path, help="folder for the report (default outputs/online-report/MODEL-TIME)")
    args = parser.parse_args(argv)
    window = window_ms(parser, args.since)
    connect(args.tracking_uri, key="--tracking-uri")
    report = build(args.model, args.experiment, args.since, window)
    out = args.out or Path("outputs/online-report") / f"{args.model}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    from serving.online.report_plots import plot_latency, plot_satisfaction

    plots = [plot_satisfaction(report, out / "satisfaction.png"), plot_latency(report, out / "latency.png")]
    (out / "report.md").write_text(markdown(report, plots), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    run_id = log_run(args.model, report, out)
    if args.json:
        print(json.dumps(report | {"out": str(out), "run_id": run_id}))
    else:
        print(markdown(report, []).rstrip())
        print(f"\nreport: {out / 'report.md'}\nplots: {', '.join(str(p) for p in plots)}\nMLflow run: {run_id}")
    worse = [c for c in report["comparisons"].values() if c["worse"]]
    return 1 if worse else 0
