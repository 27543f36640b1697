"""What a served request may hold, checked the same way by `serve.py` and by the pyfunc model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"]
    content: str


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
    history: list[Turn] = Field(default_factory=list)
    filters: dict[str, Any] | None = None
