"""What a served request may hold, checked the same way by `serve.py` and by the pyfunc model."""

from __future__ import annotations

from typing import Any, Literal

from haystack.errors import FilterError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from components.document_masks import check_filters


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"]
    content: str


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
    history: list[Turn] = Field(default_factory=list)
    filters: dict[str, Any] | None = None
    # Server-sent events: the generator's tokens as they come, then the reply (experiments/server.py).
    stream: bool = False

    @field_validator("filters")
    @classmethod
    def _well_formed(cls, filters: dict[str, Any] | None) -> dict[str, Any] | None:
        """A malformed filter is the client's mistake (400), found before the pipeline runs."""
        if filters:
            try:
                check_filters(filters)
            except FilterError as e:
                raise ValueError(str(e)) from None
        return filters
