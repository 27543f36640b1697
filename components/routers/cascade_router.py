"""Routers in order of cost: the first sure one decides, and an unsure cascade takes the heavier route."""

from __future__ import annotations

from typing import Any

from haystack import component, default_to_dict
from haystack.core.serialization import component_to_dict
from haystack.utils import deserialize_component_inplace

from components.routers.routes import RouteDecision, check_route, heaviest

UNSURE = ("heaviest", "first")


@component
class CascadeRouter:
    """
    Asks each router in turn (e.g. rules, then knn, then llm) and stops at the first whose confidence reaches its
    threshold, so most questions cost only the cheap routers. When none is sure, `when_unsure` decides:
    `heaviest` takes the heaviest route any of them proposed (seed 000's advice: spending more on a simple
    question costs seconds, while answering a multi-part question in one step loses part of it); `first` takes
    the first router's proposal (the rules' default), for when the last router's unsure guesses are mostly wrong.

    ### Usage example
    ```python
    cascade = CascadeRouter(routers=[rules, knn, llm], min_confidence=[1.0, 0.6, 1.0])
    cascade.warm_up()
    cascade.run(query="Compare plan A and plan B")  # {"route": "decompose", "router": "rules", ...}
    ```
    """

    def __init__(
        self,
        routers: list[Any],
        min_confidence: list[float],
        when_unsure: str = "heaviest",
        final_routes: list[list[str] | None] | None = None,
    ) -> None:
        """
        :param routers: Router components with `classify(query)` (components.routers.rules_router, knn_router, llm_router).
        :param min_confidence: Per router, the confidence at which its pick is final.
        :param when_unsure: `heaviest` or `first` (see above).
        :param final_routes: Per router, the routes it may decide alone (None: any); a sure pick of another route
            only joins the proposals, as an unsure one does. So a topical router need not be trusted to send a
            question away from retrieval, where a wrong pick loses the answer.
        :raises ValueError: on no routers, a threshold or route list of another length, an unknown route or an
            unknown `when_unsure`.
        """
        if not routers or len(routers) != len(min_confidence):
            raise ValueError(f"needs one min_confidence per router, got {len(routers)} routers and {len(min_confidence)}")
        if when_unsure not in UNSURE:
            raise ValueError(f"when_unsure must be one of {list(UNSURE)}, got {when_unsure!r}")
        final_routes = [None] * len(routers) if final_routes is None else final_routes
        if len(final_routes) != len(routers):
            raise ValueError(f"needs one final_routes entry per router, got {len(routers)} routers and {len(final_routes)}")
        self.routers = list(routers)
        self.min_confidence = [float(c) for c in min_confidence]
        self.when_unsure = when_unsure
        self.final_routes = [
            None if routes is None else [check_route(r, f"final_routes[{i}]") for r in routes]
            for i, routes in enumerate(final_routes)
        ]

    def warm_up(self) -> None:
        """Warms every router up."""
        for router in self.routers:
            if hasattr(router, "warm_up"):
                router.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, with its routers."""
        routers = [component_to_dict(router, f"routers[{i}]") for i, router in enumerate(self.routers)]
        return default_to_dict(
            self,
            routers=routers,
            min_confidence=self.min_confidence,
            when_unsure=self.when_unsure,
            final_routes=self.final_routes,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CascadeRouter:
        """Deserialise the component, with its routers."""
        params = dict(data["init_parameters"])
        holders = [{"router": router} for router in params["routers"]]
        for holder in holders:
            deserialize_component_inplace(holder, key="router")
        return cls(**(params | {"routers": [holder["router"] for holder in holders]}))

    def classify(self, query: str) -> RouteDecision:
        proposed: list[RouteDecision] = []
        for router, threshold, final in zip(self.routers, self.min_confidence, self.final_routes, strict=True):
            decision = router.classify(query)
            if decision.confidence >= threshold and (final is None or decision.route in final):
                return decision
            proposed.append(decision)
        route = heaviest([d.route for d in proposed]) if self.when_unsure == "heaviest" else proposed[0].route
        return RouteDecision(route, max(d.confidence for d in proposed if d.route == route), "cascade")

    @component.output_types(route=str, confidence=float, router=str, query=str)
    def run(self, query: str) -> dict[str, Any]:
        """
        :param query: The question.
        :returns: `route`, `confidence`, `router` (the router that decided, or "cascade" when none was sure) and
            the `query`.
        """
        return self.classify(query).outputs(query)
