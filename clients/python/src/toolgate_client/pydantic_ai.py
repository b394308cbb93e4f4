"""Pydantic AI: deferred tool requests answered through toolgate.

Needs the `pydantic-ai` extra. Decorate a tool function (taking `RunContext` first) with `gated(gate)` and register
it as usual; give the agent `output_type=[..., DeferredToolRequests]`. Each call is submitted to toolgate: one it
allows runs at once, one it denies returns the reason to the model, and one that waits for approvers raises
`ApprovalRequired`, so the run ends with `DeferredToolRequests`. `resolve_deferred(gate, requests)` waits for
toolgate's decisions and answers them as `DeferredToolResults` (approved with toolgate's input, or `ToolDenied`
with its reason); pass them to the next run. An approved call runs once under toolgate's claim. The idempotency key
is `key_prefix` + the model's tool call id, so a restarted run with the same ids waits on the same approvals.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from pydantic_ai import ApprovalRequired, DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved, ToolDenied

from ._async_gate import AsyncGate
from ._flow import Finished, output_json
from ._text import denial_text
from .errors import NotRun

#: The metadata key that carries toolgate's call id from the deferral to the approved run.
CALL_ID = "toolgateCallId"

P = ParamSpec("P")
R = TypeVar("R")
Tool = Callable[Concatenate[RunContext[Any], P], Awaitable[R]]


def gated(
    gate: AsyncGate, *, name: str | None = None, key_prefix: str = ""
) -> Callable[[Tool[P, R]], Tool[P, R | str]]:
    """Decorates an async tool function so toolgate decides each call and it runs exactly once."""

    def decorate(fn: Tool[P, R]) -> Tool[P, R | str]:
        tool = name or fn.__name__
        params = list(inspect.signature(fn).parameters)[1:]
        run: Callable[..., Awaitable[R]] = fn

        @functools.wraps(fn)
        async def wrapper(ctx: RunContext[Any], /, *args: P.args, **kwargs: P.kwargs) -> R | str:
            input = dict(zip(params, args), **kwargs)
            if not ctx.tool_call_id:
                return f"The call to `{tool}` was not run: it has no tool call id to gate it by"
            key = key_prefix + ctx.tool_call_id
            call_id = (ctx.tool_call_metadata or {}).get(CALL_ID) if ctx.tool_call_approved else None
            try:
                if isinstance(call_id, str):
                    # Approved in `resolve_deferred`: the call toolgate approved, whatever the arguments now are.
                    outcome = await gate.outcome(call_id)
                else:
                    decision = await gate.submit(tool, input, idempotency_key=key)
                    if decision.decision == "pending":
                        raise ApprovalRequired(metadata={CALL_ID: decision.call_id})
                    outcome = await gate.decide(tool, input, idempotency_key=key)
            except NotRun as e:
                return denial_text(tool, e)
            if isinstance(outcome, Finished):
                return outcome.output  # type: ignore[no-any-return]
            await gate.start(outcome.call_id)
            try:
                result = await run(ctx, **outcome.input)
            except Exception as e:
                await gate.finish(outcome.call_id, error=f"{type(e).__name__}: {e}")
                raise
            await gate.finish(outcome.call_id, output=output_json(result))
            return result

        return wrapper

    return decorate


async def resolve_deferred(
    gate: AsyncGate, requests: DeferredToolRequests, *, key_prefix: str = "", timeout: float | None = None
) -> DeferredToolResults:
    """Toolgate's decisions on the run's approval requests (waiting for them), as the next run's results."""
    results = DeferredToolResults()
    for call in requests.approvals:
        input = call.args_as_dict()
        try:
            outcome = await gate.decide(
                call.tool_name, input, idempotency_key=key_prefix + call.tool_call_id, timeout=timeout
            )
        except NotRun as e:
            results.approvals[call.tool_call_id] = ToolDenied(denial_text(call.tool_name, e))
            continue
        edited = None if isinstance(outcome, Finished) or outcome.input == input else outcome.input
        results.approvals[call.tool_call_id] = ToolApproved(override_args=edited)
        results.metadata[call.tool_call_id] = {CALL_ID: outcome.call_id}
    return results
