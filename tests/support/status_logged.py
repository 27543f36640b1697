"""A log handler that lets a test wait for serve.py to log a request's end with a given status."""

from __future__ import annotations

import json
import logging
import threading


class StatusLogged(logging.Handler):
    """Sets `event` when the server logs a request that ended with `status`."""

    def __init__(self, status: int, event: threading.Event):
        super().__init__()
        self.status, self.event = status, event

    def emit(self, record: logging.LogRecord) -> None:
        if json.loads(record.getMessage()).get("status") == self.status:
            self.event.set()
