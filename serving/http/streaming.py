"""serve.py's server-sent events: /query's own (`token`, `step`, then `answer` or `error`) and OpenAI's
`chat.completion.chunk` stream, fed by the pipeline's thread through a token and a step callback."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from serving.replies import AgentStep


class QueryEvents:
    """/query's server-sent events: `token` per generated piece and `step` per tool call of an agent, then `answer`
    (the reply stream=false gives, with the citation check applied) or `error`."""

    def token(self, text: str) -> str:
        return _sse({"text": text}, "token")

    def step(self, step: dict[str, Any]) -> str:
        return _sse(AgentStep.model_validate(step).model_dump(), "step")

    def final(self, reply: dict[str, Any]) -> str:
        return _sse(reply, "answer")

    def error(self, status: int, detail: str) -> str:
        return _sse({"status": status, "error": detail}, "error")


class ChatChunks:
    """OpenAI's `chat.completion.chunk` stream. The last chunk carries the whole verified reply as `ragtune`; when
    the generator streams nothing (span and extractive answers), the answer comes as one chunk before it."""

    def __init__(self, model: str) -> None:
        self.id, self.model, self.streamed = f"chatcmpl-{uuid.uuid4().hex}", model, False

    def _chunk(self, delta: dict[str, str], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": self.id, "object": "chat.completion.chunk", "created": int(time.time()), "model": self.model}
        return _sse(body | {"choices": [choice]} | extra)

    def step(self, step: dict[str, Any]) -> str:
        """OpenAI's chunks have no place for an agent's steps: its clients get the answer only."""
        return ""

    def token(self, text: str) -> str:
        first = {} if self.streamed else {"role": "assistant"}
        self.streamed = True
        return self._chunk(first | {"content": text})

    def final(self, reply: dict[str, Any]) -> str:
        whole = "" if self.streamed else self.token(reply.get("answer") or "")
        return whole + self._chunk({}, "stop", ragtune=reply) + "data: [DONE]\n\n"

    def error(self, status: int, detail: str) -> str:
        return _sse({"error": {"message": detail, "code": status}}) + "data: [DONE]\n\n"


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def streamed(
    run: Callable[[Callable[[str], None], Callable[[dict[str, Any]], None]], Awaitable[dict[str, Any]]],
    frames: QueryEvents | ChatChunks,
) -> StreamingResponse:
    """Starts `run` with a token and a step callback and streams what they produce, in order. A request refused
    before its first event (401, 400, 413, 503) is refused as a plain HTTP error; once the stream has begun, a
    failure is its last event."""
    loop = asyncio.get_running_loop()
    tokens: asyncio.Queue[str | dict[str, Any]] = asyncio.Queue()

    def put(event: str | dict[str, Any]) -> None:
        loop.call_soon_threadsafe(tokens.put_nowait, event)

    def frame(event: str | dict[str, Any]) -> str:
        return frames.token(event) if isinstance(event, str) else frames.step(event)

    task = asyncio.ensure_future(run(put, put))
    getter = asyncio.ensure_future(tokens.get())
    await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done() and not getter.done() and task.exception() is not None:
        getter.cancel()
        raise task.exception()  # type: ignore[misc]

    async def events() -> AsyncIterator[str]:
        nonlocal getter
        while True:
            done, _ = await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield frame(getter.result())
                getter = asyncio.ensure_future(tokens.get())
                continue
            getter.cancel()
            while not tokens.empty():
                yield frame(tokens.get_nowait())
            try:
                reply = task.result()
            except HTTPException as e:
                yield frames.error(e.status_code, str(e.detail))
                return
            yield frames.final(reply)
            return

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
