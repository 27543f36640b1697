"""Who asks serve.py: the principal of a request, from a bearer token (an API key or a JWT) or from a trusted
proxy's headers (serve.auth)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from fastapi import Depends, HTTPException, Request

from pipelines.errors import ConfigError
from serving.http.state import ServerContext, context_of
from serving.principals import Principal, Unauthenticated, credential_lookup, from_headers
from serving.settings import ServeSettings

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
# Headers that say who asks: sent twice (a proxy that appends instead of replacing), the request is refused.
IDENTITY_HEADERS = ("authorization", "x-tenant", "x-groups", "x-user")


async def principal_of(request: Request, context: ServerContext = Depends(context_of)) -> Principal | None:
    """Runs before the body is validated: who asks is settled first, and every refusal is logged as theirs. In the
    event loop: a key's lookup or a token's signature check takes microseconds, a thread-pool hand-off longer."""
    request.state.request_id = uuid.uuid4().hex
    duplicated = [name for name in IDENTITY_HEADERS if len(request.headers.getlist(name)) > 1]
    if duplicated:
        raise HTTPException(400, f"header {duplicated[0]} is sent more than once; send it once")
    try:
        principal = context.authenticate(request)
    except Unauthenticated:
        raise HTTPException(401, "unauthenticated: the credentials are not valid") from None
    if principal is None and context.limits.anonymous != "public":
        raise HTTPException(401, "unauthenticated: send Authorization: Bearer <key>")
    request.state.principal = principal
    return principal


def bearer(lookup: Callable[[str], Principal | None]) -> Callable[[Request], Principal | None]:
    """`Authorization: Bearer TOKEN`, TOKEN an API key (`keys.get`) or a JWT (`JwtVerifier.principal`); None when
    the request sends no Authorization header."""

    def authenticate(request: Request) -> Principal | None:
        sent = request.headers.get("authorization")
        if sent is None:
            return None
        scheme, _, token = sent.partition(" ")
        principal = lookup(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if principal is None:
            raise Unauthenticated
        return principal

    return authenticate


def authenticator(serve: ServeSettings) -> Callable[[Request], Principal | None]:
    """What `serve.auth` names; a mistake in its settings fails here, before anything loads."""
    if serve.auth == "header":
        return proxy_headers(serve.host, serve.trust_proxy)
    lookup = credential_lookup(serve, required=True)
    assert lookup is not None  # required: raises rather than return None
    return bearer(lookup)


def proxy_headers(host: str, trust_proxy: bool) -> Callable[[Request], Principal | None]:
    if host not in LOOPBACK and not trust_proxy:
        raise ConfigError(
            f"config key 'serve.auth': header auth trusts X-Tenant from any client; bind serve.host to loopback "
            f"(not {host}) behind your proxy, or set serve.trust_proxy=true"
        )
    return lambda request: from_headers(request.headers)
