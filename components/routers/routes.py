"""The routes an adaptive pipeline can take, cheapest first: the order a router falls back along when unsure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# no_retrieval: answered without looking anything up (greetings, questions about the assistant); clarify: asked
# back; single_step: one retrieval; decompose: parallel sub-questions; multi_step: look-ups that build on each other.
ROUTES = ("no_retrieval", "clarify", "single_step", "decompose", "multi_step")
# Routes that retrieve nothing: their questions have no evidence to score, only the route and its cost.
CONVERSATIONAL = ("no_retrieval", "clarify")


def heaviest(routes: list[str]) -> str:
    """The costliest of `routes`: what a router takes when it cannot tell them apart (seed 000's advice)."""
    return max(routes, key=ROUTES.index)


@dataclass(frozen=True)
class RouteDecision:
    """A router's pick: the route, how sure it is (in [0, 1]) and which router made it."""

    route: str
    confidence: float
    by: str

    def outputs(self, query: str) -> dict[str, Any]:
        """The sockets every router component gives: `route`, `confidence`, `router` and the `query` it routed."""
        return {"route": self.route, "confidence": self.confidence, "router": self.by, "query": query}


def check_route(route: str, where: str) -> str:
    if route not in ROUTES:
        raise ValueError(f"{where}: unknown route {route!r}; routes: {', '.join(ROUTES)}")
    return route
