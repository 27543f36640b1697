"""Who asks, and which documents that lets them see, as a Haystack filter every retriever applies.

A document with no `tenant` is public: every authenticated principal sees it. One with a `tenant` is seen by that
tenant only. Group ACLs (`acl` metadata) are not enforced yet, so a document that carries one is shown to nobody
(fail closed) rather than to the whole tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from experiments.config import ConfigError


@dataclass(frozen=True)
class Principal:
    tenant: str
    groups: tuple[str, ...] = ()


def visible_filter(principal: Principal) -> dict[str, Any]:
    tenant = {"operator": "OR", "conditions": [
        {"field": "meta.tenant", "operator": "==", "value": principal.tenant},
        {"field": "meta.tenant", "operator": "==", "value": None},
    ]}
    no_acl = {"field": "meta.acl", "operator": "==", "value": None}
    return {"operator": "AND", "conditions": [tenant, no_acl]}


def scoped_filters(principal: Principal, requested: Mapping[str, Any] | None) -> dict[str, Any]:
    """The principal's visibility AND the client's own filters: a client can narrow what it sees, never widen it."""
    scope = visible_filter(principal)
    return {"operator": "AND", "conditions": [scope, dict(requested)]} if requested else scope


def read_api_keys(path: Path | None) -> dict[str, Principal]:
    """serve.api_keys_file: `KEY: {tenant: NAME, groups: [..]}` per key."""
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
        if not isinstance(tenant, str) or not tenant or not isinstance(groups, list):
            raise ConfigError(f"{path}: key {str(key)[:4]}...: needs a non-empty 'tenant' and a list 'groups'")
        keys[str(key)] = Principal(tenant, tuple(str(g) for g in groups))
    return keys


def from_headers(headers: Mapping[str, str]) -> Principal | None:
    """X-Tenant and X-Groups (comma-separated), set by a trusted proxy in front."""
    tenant = (headers.get("x-tenant") or "").strip()
    if not tenant:
        return None
    groups = tuple(g.strip() for g in (headers.get("x-groups") or "").split(",") if g.strip())
    return Principal(tenant, groups)
