"""The `serve` section of conf/serve.yaml as a typed record, read the same way by serve.py and by the pyfunc model
(which takes its overrides from `$RAGTUNE_SERVE`, since `mlflow models serve` passes it no arguments)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from omegaconf import DictConfig

from experiments.runs.config import compose, typed
from experiments.runs.settings import MlflowSettings
from pipelines.choices import choices
from pipelines.errors import ConfigError, require

# `mlflow models serve` runs the pyfunc model with no arguments: its serve.* overrides come from here.
SERVE_ENV = "RAGTUNE_SERVE"

Auth = choices("Auth", ("api_keys", "jwt", "header"))
Anonymous = choices("Anonymous", ("refuse", "public"))
TraceContent = choices("TraceContent", ("full", "redacted", "none"))

@dataclass
class JwtSettings:
    """`serve.jwt`: how a signed token's claims become a principal."""

    # HS256/384/512: a file holding the shared secret; RS*, ES*, PS*, EdDSA: the issuer's public key (PEM).
    key_file: str | None = None
    # The algorithms a token may be signed with; one family only (never `none`).
    algorithms: list[str] = field(default_factory=lambda: ["RS256"])
    # When set, a token must carry this `aud` / `iss`. `exp` is always required.
    audience: str | None = None
    issuer: str | None = None
    # The claims that carry the principal's tenant and groups.
    tenant_claim: str = "tenant"
    groups_claim: str = "groups"
    # Seconds of clock skew allowed when checking `exp`.
    leeway_s: float = 0.0


@dataclass
class TraceSettings:
    """`serve.trace`: every answered request is an MLflow trace (serving/online/traces.py)."""

    # Record traces at all; false: none, and POST /feedback answers 404.
    enabled: bool = True
    # The share of requests (0 to 1) whose trace holds a span per component; every other request keeps a root span
    # with its tags (request id, variant, model version, tenant, latency, refused), question, answer and citations,
    # which is all feedback, the report and harvest read. Every span costs the request thread: on the demo at 4
    # clients, 1.0 served 16 % fewer requests a second than no tracing, 0 (root spans only) 6 % fewer.
    sample: float = 0.1
    # What the spans hold of questions, passages, answers and feedback comments: full, redacted (each text replaced
    # by its sha256 and length) or none (no inputs or outputs at all).
    content: TraceContent = TraceContent.redacted
    # `ragtune traces prune` (from cron) deletes the served model's traces older than this many days.
    retention_days: int = 30
    # Traces (and feedback) waiting for the store; more are dropped and counted (/healthz: traces.dropped).
    queue_size: int = 1000

    def check(self) -> None:
        require(0.0 <= self.sample <= 1.0, "serve.trace.sample", f"must be between 0 and 1, got {self.sample}")
        require(self.retention_days >= 1, "serve.trace.retention_days", "must be at least 1")
        require(self.queue_size >= 1, "serve.trace.queue_size", "must be at least 1")


@dataclass
class CacheSettings:
    """`serve.cache`: replies to repeated questions, kept in memory by serve.py (serving/http/answer_cache.py)."""

    # Answer a question asked again in the same scope from memory (serve.py only; each of serve.workers keeps its
    # own). Off by default: a hit skips the
    # pipeline, so an answer stays as first given (a sampling generator's too) until evicted or serve.py restarts;
    # a hit runs no shadow and traces no component; and hits lower the latency the online report compares.
    enabled: bool = False
    # Replies kept at most; the least recently used goes first.
    max_entries: int = 1024
    # Bytes of replies (as JSON) kept at most; a larger reply is not kept.
    max_bytes: int = 64 << 20
    # Seconds a reply is served from the cache; null: until it is evicted or serve.py restarts.
    ttl_s: float | None = None

    def check(self) -> None:
        require(self.max_entries >= 1, "serve.cache.max_entries", "must be at least 1")
        require(self.max_bytes >= 1, "serve.cache.max_bytes", "must be at least 1")
        require(self.ttl_s is None or self.ttl_s > 0, "serve.cache.ttl_s", f"must be above 0 or null, got {self.ttl_s}")


@dataclass
class ServeSettings:
    """`serve`: conf/serve.yaml extends this record, so a wrong type fails naming the key, before anything loads."""

    # The address the server listens on; 0.0.0.0 for every interface.
    host: str = "127.0.0.1"
    # The port it listens on.
    port: int = 8080
    # api_keys: `Authorization: Bearer KEY`, looked up in api_keys_file; jwt: `Authorization: Bearer TOKEN`, a signed
    # token whose claims carry the tenant and groups; header: X-Tenant and X-Groups set by a proxy in front (refused
    # unless host is loopback or trust_proxy is true). No principal, or an unknown one: 401.
    auth: Auth = Auth.api_keys
    # YAML: KEY: {tenant: acme, groups: [hr]}, e.g. data/demo/api_keys.yaml for the demo's tenants; `admin: true` on
    # a key lets it read GET /metrics from off loopback (it still sees only its own tenant's documents).
    api_keys_file: str | None = None
    jwt: JwtSettings = field(default_factory=JwtSettings)
    # auth=header from a host other than loopback: true says a proxy that sets the headers is in front.
    trust_proxy: bool = False
    # A request without credentials: refuse (401), or public (answered from public documents only).
    anonymous: Anonymous = Anonymous.refuse
    # Metadata fields a client may filter on; null: any `meta.*` field.
    filter_fields: list[str] | None = None
    # A larger request body gets 413 before it is parsed.
    max_body_bytes: int = 1 << 20
    # Requests answered or waiting at once, per worker; more get 503. A worker's pipeline answers one question at a
    # time.
    max_pending: int = 8
    # Seconds an answer may take; a slower one gets 504.
    timeout_s: float = 60.0
    # Longer questions or histories get 413, naming the limit.
    max_question_chars: int = 2000
    max_history_turns: int = 20
    max_history_chars: int = 20000
    # Log the question in the per-request log lines, and return the chunk ids at every stage (`stages`) in replies.
    debug: bool = False
    trace: TraceSettings = field(default_factory=TraceSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    # Replaced by serve.trace (every request is traced); true is still accepted: serve.trace.sample=1, and the traces
    # go to experiment ragtune-serve unless trace_experiment says otherwise.
    autolog: bool = False
    # The experiment of mlflow.tracking_uri the traces go to; null: "ragtune-serve/<registered model name>".
    trace_experiment: str | None = None
    # A/B test: aliases of `model` (models:/NAME, no alias) and their share of users, e.g. {champion: 0.9,
    # challenger: 0.1}; each user keeps one variant (a salted hash of the principal). Empty: `model` alone.
    variants: dict[str, float] = field(default_factory=dict)
    # An alias of the same registered model that answers each answered request again in the background: traced,
    # never returned. Null: no shadow.
    shadow: str | None = None
    # Shadow answers at once (each in a low-priority thread); a request finding them all busy is not shadowed, and
    # counted (/metrics: ragtune_shadow_shed).
    shadow_concurrency: int = 1
    # Changing the salt reshuffles which users see which variant.
    variant_salt: str = "ragtune"
    # Processes answering on the one port (serve.py only), each with its own pipeline over the same downloaded
    # bundle: the index snapshot and the GGUF models are mapped, so their pages are shared, and a worker adds
    # throughput more than memory. serve.max_pending, serve.cache and the trace queue are per worker; /readyz and
    # /metrics cover them all. 1: one process, as before.
    workers: int = 1

    def check(self) -> None:
        weights = self.variants
        require(all(weight >= 0 for weight in weights.values()) and (not weights or sum(weights.values()) > 0),
                "serve.variants", f"weights must be >= 0 with a positive sum, got {dict(weights)}")
        require(self.shadow is None or self.shadow not in weights, "serve.shadow",
                f"{self.shadow!r} is also in serve.variants; a variant either answers its users or shadows, not both")
        require(self.shadow_concurrency >= 1, "serve.shadow_concurrency", "must be at least 1")
        require(self.workers >= 1, "serve.workers", f"must be at least 1, got {self.workers}")


# Keys under which a user names the entries (a mapping with no fixed keys).
OPEN_KEYS = ("serve.variants.",)
# conf/serve.yaml's sections and their records.
SERVE_SECTIONS = {"mlflow": MlflowSettings, "serve": ServeSettings}


def compose_serve(overrides: Sequence[str]) -> DictConfig:
    """conf/serve.yaml with command-line style overrides. serve.variants' keys are the user's own aliases, which
    no schema lists, so `serve.variants.ALIAS=W` adds the key (Hydra's `++`) rather than fail as unknown."""
    opened = [f"++{o}" if o.startswith(OPEN_KEYS) else o for o in overrides]
    return compose(opened, config_name="serve", sections=SERVE_SECTIONS)


def serve_settings(cfg: DictConfig) -> ServeSettings:
    settings = typed(cfg, "serve", ServeSettings)
    if settings.autolog:  # an older config: its traces stay where they went, every request fully traced
        settings.trace.sample = 1.0
        settings.trace_experiment = settings.trace_experiment or "ragtune-serve"
    return settings


def env_config() -> DictConfig:
    """conf/serve.yaml with the overrides in `$RAGTUNE_SERVE` (e.g. "serve.api_keys_file=keys.yaml")."""
    overrides = shlex.split(os.environ.get(SERVE_ENV, ""))
    try:
        return compose_serve(overrides)
    except Exception as e:  # Hydra's override grammar errors: said with where they came from
        raise ConfigError(f"${SERVE_ENV}: {e}") from None


def env_settings() -> ServeSettings:
    return serve_settings(env_config())
