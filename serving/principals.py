"""Who asks, and which documents that lets them see, as a Haystack filter every retriever applies.

A document with neither `tenant` nor `acl` is public: every principal sees it, and so does an anonymous request
where `serve.anonymous=public` allows one. A document with a `tenant` is seen by that tenant only, and when it also
carries `acl` (a list of groups), only by that tenant's principals in one of those groups. A document with an
`acl` but no `tenant` is shown to nobody (fail closed): groups are named per tenant, so without one the ACL cannot
say whose groups it means. serve.py and the pyfunc model both scope through `scoped_filters`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import yaml
from jwt.algorithms import get_default_algorithms

from pipelines.errors import ConfigError
from serving.settings import JwtSettings, ServeSettings

logger = logging.getLogger("ragtune.serve")
# Shortest HMAC secret per algorithm: the hash's size (RFC 7518, section 3.2).
HMAC_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}


@dataclass(frozen=True)
class Principal:
    tenant: str
    groups: tuple[str, ...] = ()
    # An operator's key (`admin: true` in serve.api_keys_file): may read GET /metrics from off loopback. It sees no
    # more documents than its tenant and groups allow.
    admin: bool = False
    # Who, within the tenant: an API key's `user` (else a hash of the key), a JWT's `sub`, a proxy's X-User. It
    # keeps a user on one served variant (serving.online.variants) and lets only them rate their replies; it
    # widens or narrows no document's visibility.
    subject: str = ""


class Unauthenticated(Exception):
    """Credentials were given and are not valid (401); why goes to the log, never to the client."""


def visible_filter(principal: Principal | None) -> dict[str, Any]:
    """What `principal` may see; None (an anonymous request) sees public documents only."""
    no_acl = {"field": "meta.acl", "operator": "==", "value": None}
    public = {"operator": "AND", "conditions": [{"field": "meta.tenant", "operator": "==", "value": None}, no_acl]}
    if principal is None:
        return public
    # `in` on a list field matches a shared element (components/retrievers/document_masks.py), as on Weaviate. Without
    # groups it is left out: it would match nothing, and Weaviate refuses an empty ContainsAny.
    allowed: list[dict[str, Any]] = [no_acl]
    if principal.groups:
        allowed.append({"field": "meta.acl", "operator": "in", "value": list(principal.groups)})
    own = {"operator": "AND", "conditions": [
        {"field": "meta.tenant", "operator": "==", "value": principal.tenant},
        {"operator": "OR", "conditions": allowed},
    ]}
    return {"operator": "OR", "conditions": [public, own]}


def scoped_filters(principal: Principal | None, requested: Mapping[str, Any] | None) -> dict[str, Any]:
    """The principal's visibility AND the client's own filters: a client can narrow what it sees, never widen it."""
    scope = visible_filter(principal)
    return {"operator": "AND", "conditions": [scope, dict(requested)]} if requested else scope


def credential_lookup(serve: ServeSettings, required: bool) -> Callable[[str], Principal | None] | None:
    """A key or token -> its principal, as `serve.auth` says; every setting is checked here, at start. None when
    no credentials are configured and none are `required` (the pyfunc model of an index with no tenants)."""
    if serve.auth == "api_keys":
        if serve.api_keys_file is None and not required:
            return None
        return read_api_keys(Path(serve.api_keys_file) if serve.api_keys_file else None).get
    if serve.auth == "jwt":
        return JwtVerifier(serve.jwt).principal
    if serve.auth == "header":
        raise ConfigError("config key 'serve.auth': header auth needs serve.py, which sees the request's headers")
    raise ConfigError(f"config key 'serve.auth': must be api_keys, jwt or header, got {serve.auth!r}")


def read_api_keys(path: Path | None) -> dict[str, Principal]:
    """serve.api_keys_file: `KEY: {tenant: NAME, groups: [..], admin: true|false, user: NAME}` per key (admin and
    user optional)."""
    if path is None:
        raise ConfigError("config key 'serve.api_keys_file': serve.auth=api_keys needs a YAML file of keys")
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"config key 'serve.api_keys_file': cannot read {path}: {e}") from None
    if not isinstance(entries, dict) or not entries:
        raise ConfigError(f"{path}: expected a mapping of API keys to {{tenant, groups}}")
    keys = {}
    for key, entry in entries.items():
        tenant = entry.get("tenant") if isinstance(entry, dict) else None
        groups = entry.get("groups", []) if isinstance(entry, dict) else None
        admin = entry.get("admin", False) if isinstance(entry, dict) else None
        user = entry.get("user", key_subject(str(key))) if isinstance(entry, dict) else None
        if (not isinstance(tenant, str) or not tenant or not isinstance(groups, list) or not isinstance(admin, bool)
                or not isinstance(user, str) or not user):
            raise ConfigError(
                f"{path}: key {str(key)[:4]}...: needs a non-empty 'tenant', a list 'groups', 'admin' true or false "
                f"and, if given, a non-empty 'user'"
            )
        keys[str(key)] = Principal(tenant, tuple(str(g) for g in groups), admin, user)
    return keys


def key_subject(key: str) -> str:
    """A key's user when the keys file names none: a short hash, so the key itself is never kept or logged."""
    return "key:" + hashlib.sha256(key.encode()).hexdigest()[:12]


def from_headers(headers: Mapping[str, str]) -> Principal | None:
    """X-Tenant, X-Groups (comma-separated) and X-User, set by a trusted proxy in front."""
    tenant = (headers.get("x-tenant") or "").strip()
    if not tenant:
        return None
    groups = tuple(g.strip() for g in (headers.get("x-groups") or "").split(",") if g.strip())
    return Principal(tenant, groups, subject=(headers.get("x-user") or "").strip())


class JwtVerifier:
    """Checks signature, expiry (required), audience and issuer; a token that fails any is no principal (401).
    The key is loaded and checked against every configured algorithm when the verifier is made, at start."""

    def __init__(self, settings: JwtSettings) -> None:
        algorithms = list(settings.algorithms)
        shared = {a.startswith("HS") for a in algorithms}
        if not algorithms or "none" in (a.lower() for a in algorithms) or len(shared) > 1:
            raise ConfigError(
                "config key 'serve.jwt.algorithms': give one family, e.g. [RS256] (public key) or [HS256] (shared "
                f"secret); 'none' is never accepted, got {algorithms}"
            )
        if settings.key_file is None:
            raise ConfigError("config key 'serve.jwt.key_file': serve.auth=jwt needs the issuer's public key or secret")
        try:
            self._key = Path(settings.key_file).read_bytes().strip()
        except OSError as e:
            raise ConfigError(f"config key 'serve.jwt.key_file': cannot read {settings.key_file}: {e}") from None
        for algorithm in algorithms:
            _check_key(self._key, algorithm, settings.key_file)
        self.settings = settings

    def principal(self, token: str) -> Principal | None:
        settings = self.settings
        try:
            claims = jwt.decode(
                token, self._key, algorithms=list(settings.algorithms), audience=settings.audience,
                issuer=settings.issuer, leeway=settings.leeway_s, options={"require": ["exp"]},
            )
        except jwt.InvalidTokenError as e:
            logger.info("jwt rejected: %s", e)
            return None
        tenant, groups = claims.get(settings.tenant_claim), claims.get(settings.groups_claim, [])
        if not isinstance(tenant, str) or not tenant or not isinstance(groups, list):
            logger.info("jwt rejected: claim %r must be a non-empty string and %r a list", settings.tenant_claim,
                        settings.groups_claim)
            return None
        subject = claims.get("sub")
        return Principal(tenant, tuple(str(g) for g in groups), subject=subject if isinstance(subject, str) else "")


def _check_key(key: bytes, algorithm: str, key_file: str) -> None:
    """A key that cannot verify `algorithm`'s signatures would make a ready server answer every token with 500."""
    known = get_default_algorithms()
    where = f"config key 'serve.jwt.key_file': {key_file}"
    if algorithm not in known:
        raise ConfigError(f"config key 'serve.jwt.algorithms': unknown algorithm {algorithm!r}; known: {sorted(known)}")
    if algorithm in HMAC_BYTES and len(key) < HMAC_BYTES[algorithm]:
        raise ConfigError(f"{where} holds {len(key)} bytes; an {algorithm} secret needs at least {HMAC_BYTES[algorithm]}")
    try:
        prepared = known[algorithm].prepare_key(key)
    except (jwt.InvalidKeyError, ValueError, TypeError) as e:
        raise ConfigError(f"{where} is not a key for {algorithm}: {e}") from None
    if algorithm not in HMAC_BYTES and not hasattr(prepared, "verify"):
        raise ConfigError(f"{where} is a private key; give the issuer's public key (PEM) to verify {algorithm}")
