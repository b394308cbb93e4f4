"""The call-gating API's bodies, as typed values.

Each dataclass mirrors one schema of the server's OpenAPI document (`/openapi.json`); every field names the
property it is read from in its metadata (`wire`), and a test holds the fields to the document's properties, so
the client cannot drift from the server. Unknown properties are kept in `raw`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

#: What `POST /api/calls` answers: decided at once, or waiting for approvers.
Decision = Literal["allow", "deny", "pending"]

#: Where a call stands (`GET /api/calls/{id}`).
State = Literal["pending", "approved", "denied", "expired", "started", "finished", "interrupted"]

#: States after which the call's decision is known (it will never be `pending` again).
DECIDED: frozenset[str] = frozenset({"approved", "denied", "expired", "started", "finished", "interrupted"})


def _wire(name: str, default: Any = None) -> Any:
    return field(default=default, metadata={"wire": name})


@dataclass(frozen=True)
class CallRequest:
    """The body of `POST /api/calls`."""

    tool: str = _wire("tool", "")
    input: Any = _wire("input")
    conversation_id: str | None = _wire("conversationId")
    idempotency_key: str | None = _wire("idempotencyKey")
    description: str | None = _wire("description")
    input_schema: dict[str, Any] | None = _wire("inputSchema")
    wait: str | None = _wire("wait")

    def to_json(self) -> dict[str, Any]:
        """The JSON body: `tool` and `input` always, the optional properties when set."""
        body: dict[str, Any] = {"tool": self.tool, "input": self.input}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in ("tool", "input") and value is not None:
                body[f.metadata["wire"]] = value
        return body


@dataclass(frozen=True)
class CallDecision:
    """The answer of `POST /api/calls`: 200 `CallDecided` (`allow`/`deny`, with the state and the input to run)
    or 202 `CallPending` (`pending`, with the approval and who decides)."""

    call_id: str = _wire("callId", "")
    decision: Decision = _wire("decision", "pending")
    state: State = _wire("state", "pending")
    reason: str | None = _wire("reason")
    input: Any = _wire("input")
    approval_id: str | None = _wire("approvalId")
    approvers: list[str] | None = _wire("approvers")
    quorum: int | None = _wire("quorum")
    expires_at: str | None = _wire("expiresAt")
    url: str | None = _wire("url")
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class CallState:
    """A call as it stands (`CallStatus`): `input` is what to run once approved (`edited` when an approver
    changed it); a finished call has its `output` or its `error` (any JSON)."""

    call_id: str = _wire("callId", "")
    state: State = _wire("state", "pending")
    tool: str | None = _wire("tool")
    input: Any = _wire("input")
    edited: bool = _wire("edited", False)
    reason: str | None = _wire("reason")
    approval_id: str | None = _wire("approvalId")
    approvers: list[str] | None = _wire("approvers")
    quorum: int | None = _wire("quorum")
    expires_at: str | None = _wire("expiresAt")
    output: Any = _wire("output")
    error: Any = _wire("error")
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def decided(self) -> bool:
        """Whether the call's decision is known."""
        return self.state in DECIDED


T = TypeVar("T", CallDecision, CallState)


def wire_fields(cls: type[Any]) -> dict[str, str]:
    """The dataclass's fields by the JSON property each is read from (`raw` has none)."""
    return {f.metadata["wire"]: f.name for f in dataclasses.fields(cls) if "wire" in f.metadata}


def parse(cls: type[T], body: Any) -> T:
    """Reads a JSON object into `cls`; a body that is not an object, or has no call id, is a `ProtocolError`."""
    from .errors import ProtocolError

    if not isinstance(body, dict) or not isinstance(body.get("callId"), str):
        raise ProtocolError(f"expected a {cls.__name__} object with a callId, got {body!r:.200}")
    values = {name: body[wire] for wire, name in wire_fields(cls).items() if wire in body}
    return cls(**values, raw=body)


def wait_param(seconds: float | None) -> str | None:
    """A wait in seconds as the server's duration syntax (`"30s"`), at least 0 and at most 60 (the server's cap)."""
    if seconds is None:
        return None
    whole = max(0, min(60, int(seconds)))
    return f"{whole}s"
