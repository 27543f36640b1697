"""The one error a build raises: a user can fix it (a missing tool, a package apt cannot find, a bad --deb)."""

from __future__ import annotations

from pipelines.errors import UserError


class DocSetError(UserError):
    """A set cannot be built: the message says which step failed and what to do."""
