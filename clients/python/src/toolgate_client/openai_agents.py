"""The OpenAI Agents SDK: `needs_approval` and the run's interruptions decided through toolgate.

Needs the `openai-agents` extra. `gate_tool(gate, tool)` returns a copy of a `FunctionTool` whose
`needs_approval` asks toolgate (a call it allows at once needs no approval) and whose invocation runs the approved
(possibly edited) input exactly once under toolgate's claim. After a run stops on interruptions,
`resolve_interruptions(gate, result)` waits for each call's decision and approves or rejects it in the run state
(a rejection carries toolgate's reason to the model); run the state again to go on. `Runner.run_streamed` works
the same way: once its events are consumed, its result is resolved like `Runner.run`'s. The idempotency key is
`key_prefix` + the model's call id, so a restarted run with the same call ids waits on the same approvals.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunResult, RunResultStreaming, RunState
from agents.tool_context import ToolContext

from ._async_gate import AsyncGate
from ._flow import Finished, output_json
from ._text import denial_text
from .errors import NotRun


def gate_tool(gate: AsyncGate, tool: FunctionTool, *, key_prefix: str = "") -> FunctionTool:
    """`tool` decided and run through toolgate, under its own name."""
    invoke = tool.on_invoke_tool

    async def needs_approval(_ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        decision = await gate.submit(tool.name, params, idempotency_key=key_prefix + call_id)
        return decision.decision != "allow"

    async def on_invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        input = json.loads(arguments) if arguments else {}
        try:
            outcome = await gate.decide(tool.name, input, idempotency_key=key_prefix + ctx.tool_call_id)
        except NotRun as e:
            return denial_text(tool.name, e)
        if isinstance(outcome, Finished):
            return outcome.output
        await gate.start(outcome.call_id)
        try:
            result = await invoke(ctx, json.dumps(outcome.input))
        except Exception as e:
            await gate.finish(outcome.call_id, error=f"{type(e).__name__}: {e}")
            raise
        await gate.finish(outcome.call_id, output=output_json(result))
        return result

    return dataclasses.replace(tool, needs_approval=needs_approval, on_invoke_tool=on_invoke)


async def resolve_interruptions(
    gate: AsyncGate, result: RunResult | RunResultStreaming, *, key_prefix: str = "", timeout: float | None = None
) -> RunState[Any]:
    """The run's state with each interruption approved or rejected as toolgate decided (waiting for it): of a
    `Runner.run` result, or of a `Runner.run_streamed` one whose events were consumed to the end."""
    state: RunState[Any] = result.to_state()
    for item in result.interruptions:
        name = item.name or ""
        if not item.call_id:
            state.reject(item, rejection_message=f"The call to `{name}` was not run: it has no call id to gate it by")
            continue
        input = json.loads(item.arguments) if item.arguments else {}
        try:
            await gate.decide(name, input, idempotency_key=key_prefix + item.call_id, timeout=timeout)
        except NotRun as e:
            state.reject(item, rejection_message=denial_text(name, e))
        else:
            state.approve(item)
    return state
