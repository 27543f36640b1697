"""What a served request may hold, checked the same way by `serve.py` and by the pyfunc model before the pipeline
runs, so that a bad request is a 400 whose message depends on the request alone, never on the documents."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from haystack.errors import FilterError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from components.retrievers.document_masks import EQUALITY, LOGICAL, RANGE, check_condition
from serving.settings import ServeSettings

MAX_FILTER_DEPTH = 8
MAX_FILTER_FIELDS = 64
MAX_LIST_VALUES = 1024
# A metadata field a client may filter on: `meta.` and a plain name (dots for nested keys).
FIELD = re.compile(r"meta\.[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
Scalar = str | int | float | bool | None


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"]
    content: str


class _Checked(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """Checked first, so that no message built from the request holds a string that cannot be encoded."""
        check_unicode(data)
        return data


class ChatRequest(_Checked):
    """OpenAI's chat request. What would change the reply's shape (several choices, tool calls, JSON) is refused
    naming its field, rather than ignored: a client must not take a plain answer for what it asked."""

    model_config = ConfigDict(extra="allow")  # OpenAI clients send model, temperature, ...: accepted, not used
    messages: list[Turn]
    stream: bool = False
    n: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int | None) -> int | None:
        if n not in (None, 1):
            raise ValueError(f"one choice is served, n must be 1, got {n}")
        return n

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, tools: list[Any] | None) -> list[Any] | None:
        if tools:
            raise ValueError("tool calls are not served; send no tools")
        return tools

    @field_validator("tool_choice")
    @classmethod
    def _no_tool_choice(cls, choice: Any) -> Any:
        if choice not in (None, "none"):
            raise ValueError('tool calls are not served; send no tool_choice, or "none"')
        return choice

    @field_validator("response_format")
    @classmethod
    def _text_only(cls, response_format: dict[str, Any] | None) -> dict[str, Any] | None:
        if response_format is not None and response_format.get("type") != "text":
            raise ValueError('the reply is plain text; send no response_format, or {"type": "text"}')
        return response_format


class QueryRequest(_Checked):
    model_config = ConfigDict(extra="forbid")
    question: str
    history: list[Turn] = Field(default_factory=list)
    filters: dict[str, Any] | None = None
    # Server-sent events: the generator's tokens as they come, then the reply (serving/http/streaming.py).
    stream: bool = False

    @field_validator("filters")
    @classmethod
    def _well_formed(cls, filters: dict[str, Any] | None) -> dict[str, Any] | None:
        """A malformed filter is the client's mistake (400), found before the pipeline runs."""
        if filters:
            try:
                check_request_filters(filters)
            except FilterError as e:
                raise ValueError(str(e)) from None
        return filters


class PyfuncRequest(QueryRequest):
    """A request to the pyfunc model (`mlflow models serve`), which sees no headers: the caller's API key or
    signed token (JWT) comes in the body."""

    credentials: str | None = None


class RequestRefused(Exception):
    """A request refused before the pipeline runs: its HTTP status and a reason that names the field."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def check_request(question: str, history: Sequence[str], filters: Any, limits: ServeSettings) -> None:
    """The limits of conf/serve.yaml on a request whose shape its model has checked; `history` is the turns' text."""
    if not question.strip():
        raise RequestRefused(400, "question: must not be empty")
    if len(question) > limits.max_question_chars:
        raise RequestRefused(413, f"question: {len(question)} characters, the limit is {limits.max_question_chars}")
    if len(history) > limits.max_history_turns:
        raise RequestRefused(413, f"history: {len(history)} turns, the limit is {limits.max_history_turns}")
    if (chars := sum(len(text) for text in history)) > limits.max_history_chars:
        raise RequestRefused(413, f"history: {chars} characters, the limit is {limits.max_history_chars}")
    if filters and limits.filter_fields is not None:
        try:
            check_request_filters(filters, limits.filter_fields)
        except FilterError as e:
            raise RequestRefused(400, f"invalid request: filters: {e}") from None


def check_request_filters(filters: Any, allowed_fields: Sequence[str] | None = None) -> None:
    """Haystack filter syntax, plus what a client may send: at most MAX_FILTER_DEPTH levels and MAX_FILTER_FIELDS
    field names, `meta.*` fields (only `allowed_fields` when given), and values a comparison can take."""
    fields: set[str] = set()
    for condition, depth in _conditions(filters, 1):
        if depth > MAX_FILTER_DEPTH:
            raise FilterError(f"filters are nested deeper than {MAX_FILTER_DEPTH} levels")
        check_condition(condition)
        if condition["operator"] in LOGICAL:
            continue
        field, operator, value = condition["field"], condition["operator"], condition["value"]
        if not FIELD.fullmatch(field):
            raise FilterError(f"filter field {field[:80]!r}: a client filters on metadata, e.g. meta.lang")
        if allowed_fields is not None and field not in allowed_fields:
            raise FilterError(f"filter field {field!r} is not one of serve.filter_fields: {list(allowed_fields)}")
        fields.add(field)
        if len(fields) > MAX_FILTER_FIELDS:
            raise FilterError(f"filters name more than {MAX_FILTER_FIELDS} fields")
        _check_value(field, operator, value)


def _conditions(filters: Any, depth: int) -> Iterator[tuple[dict[str, Any], int]]:
    """Every condition with its nesting level, breadth first, so an overly deep filter is refused at the first
    level past the limit instead of recursing into all of it."""
    level: list[Any] = [filters]
    while level:
        following: list[Any] = []
        for condition in level:
            yield condition, depth
            conditions = condition.get("conditions")
            if condition.get("operator") in LOGICAL and isinstance(conditions, list):
                following.extend(conditions)
        level, depth = following, depth + 1


def _check_value(field: str, operator: str, value: Any) -> None:
    if operator in ("in", "not in"):
        if len(value) > MAX_LIST_VALUES:
            raise FilterError(f"'{operator}' on {field}: at most {MAX_LIST_VALUES} values, got {len(value)}")
        if not all(_is_scalar(v) for v in value):
            raise FilterError(f"'{operator}' on {field}: the list holds strings, numbers, booleans or null only")
    elif operator in EQUALITY:
        if not _is_scalar(value):
            raise FilterError(f"'{operator}' on {field}: compares with a string, number, boolean or null, "
                              f"not {type(value).__name__} (use 'in' for a list)")
    elif operator in RANGE and (isinstance(value, bool) or not isinstance(value, int | float | str)
                                or (isinstance(value, float) and not math.isfinite(value))):
        raise FilterError(f"'{operator}' on {field}: compares with a number or an ISO date string, "
                          f"not {type(value).__name__}")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | bool | int) or (isinstance(value, float) and math.isfinite(value))


def check_unicode(value: Any) -> None:
    """Every string a request carries must be valid Unicode: a lone surrogate (JSON "\\ud800") cannot be encoded."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("invalid Unicode: a string holds a lone surrogate") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_unicode(key)
            check_unicode(item)
    elif isinstance(value, list):
        for item in value:
            check_unicode(item)
