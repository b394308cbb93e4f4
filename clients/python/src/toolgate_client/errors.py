"""What the client raises.

`ToolgateError` carries the server's stable error code (`{"error": {"code", "message"}}`); the outcomes of a
gated call that mean "do not run it" are their own types, so an agent can tell a denial from a broken server.
"""

from __future__ import annotations

from typing import Any


class ToolgateError(Exception):
    """A request the server refused (`status`, `code`, `message`), or one that could not be made."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.status = status
        self.code = code
        self.message = message


class ProtocolError(ToolgateError):
    """The server answered with something that is not the call-gating API's shape."""


class NotRun(ToolgateError):
    """The call must not run; `call_id` names it and `reason` says why."""

    def __init__(self, call_id: str, reason: str | None, *, code: str) -> None:
        super().__init__(reason or code, code=code)
        self.call_id = call_id
        self.reason = reason


class Denied(NotRun):
    """The call was denied (by a rule, a standing decision or an approver), with the reason."""

    def __init__(self, call_id: str, reason: str | None) -> None:
        super().__init__(call_id, reason, code="denied")


class Expired(NotRun):
    """The approval expired before it was decided."""

    def __init__(self, call_id: str, reason: str | None = None) -> None:
        super().__init__(call_id, reason or "the approval expired", code="expired")


class AlreadyStarted(NotRun):
    """Another process claimed the run (409 `call_already_started`), or it was claimed and never finished."""

    def __init__(self, call_id: str, reason: str | None = None, *, code: str = "call_already_started") -> None:
        super().__init__(call_id, reason or "the call was already started", code=code)


class Failed(ToolgateError):
    """The gated function ran and failed; the run was recorded as finished with `error`."""

    def __init__(self, call_id: str, error: str, output: Any = None) -> None:
        super().__init__(error, code="failed")
        self.call_id = call_id
        self.error = error
        self.output = output


def from_response(status: int, body: Any, text: str) -> ToolgateError:
    """The error an error response stands for: its `{"error": {"code", "message"}}`, else the status and text."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return ToolgateError(str(error.get("message", "")), status=status, code=error["code"])
    return ToolgateError(f"HTTP {status}: {text[:200]}", status=status)
