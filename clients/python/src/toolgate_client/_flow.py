"""What a decided call means for the caller, shared by `Gate` and `AsyncGate` (no I/O here)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._models import CallDecision, CallState
from .errors import AlreadyStarted, Denied, Expired, Failed, ProtocolError

#: How long one long poll asks the server to hold (the server's cap is 60 s).
POLL_SECONDS = 30.0


@dataclass(frozen=True)
class Approved:
    """A call that may run: its id and the input to run (as approved, edited or not)."""

    call_id: str
    input: Any


@dataclass(frozen=True)
class Finished:
    """A call some earlier run of this process already ran: what it returned."""

    call_id: str
    output: Any


def settle(state: CallState) -> Approved | Finished | None:
    """`None` while pending; `Approved` to run; `Finished` when already run; raises when it must not run."""
    match state.state:
        case "pending":
            return None
        case "approved":
            return Approved(state.call_id, state.input)
        case "denied":
            raise Denied(state.call_id, state.reason)
        case "expired":
            raise Expired(state.call_id, state.reason)
        case "finished":
            if state.error is not None:
                raise Failed(state.call_id, error_text(state.error), state.output)
            return Finished(state.call_id, state.output)
        case "started":
            raise AlreadyStarted(state.call_id, "the call is running elsewhere")
        case "interrupted":
            raise AlreadyStarted(state.call_id, "a run was started and never finished", code="interrupted")
    raise ProtocolError(f"unknown call state {state.state!r}")


def settle_decision(decision: CallDecision) -> Approved | None:
    """What `POST /api/calls` settles at once: `deny` raises (`Expired` for an expired call); `allow` of an
    approved call is `Approved` with its input; anything else is read from the call's state (a retry that
    attached to an earlier call may find it started or already run)."""
    if decision.decision == "deny":
        if decision.state == "expired":
            raise Expired(decision.call_id, decision.reason)
        raise Denied(decision.call_id, decision.reason)
    if decision.decision == "allow" and decision.state == "approved":
        return Approved(decision.call_id, decision.input)
    return None


def error_text(error: Any) -> str:
    """A recorded error (any JSON) as text."""
    return error if isinstance(error, str) else json.dumps(error)


def bind_input(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A function call's arguments as the JSON object the gate sees, by parameter name, defaults included."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def output_json(value: Any) -> Any:
    """A function's result as JSON for `finish`: itself when it is JSON, else its text."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
