"""LangChain and LangGraph: tools whose calls toolgate decides and runs exactly once.

Two ways in (needs the `langchain` extra):

- `gate_tool(gate, tool)` wraps one `BaseTool`: each call is gated, claimed, run with the approved (possibly
  edited) input and finished; a denial or expiry is a `ToolException`, which the tool turns into an error
  `ToolMessage` for the model (`handle_tool_error=True`).
- `ToolgateMiddleware(gate, interrupt_on={...})` has the shape of LangChain's `HumanInTheLoopMiddleware`, for
  `create_agent(..., middleware=[...])`: the tools it names are decided by toolgate instead of a graph interrupt.
  The idempotency key is `key_prefix` + the model's tool call id, so an agent restarted on the same thread
  waits on the same approval. A denial is an error `ToolMessage` naming the reason, as a rejection is there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ._async_gate import AsyncGate
from ._flow import Finished, output_json
from ._gate import Gate
from ._text import denial_text
from .errors import NotRun

ToolResult = ToolMessage | Command[Any]


def gate_tool(gate: Gate | AsyncGate, tool: BaseTool, *, key: Callable[..., str] | None = None) -> BaseTool:
    """`tool`, gated by toolgate under its own name: sync with a `Gate`, async with an `AsyncGate`."""

    def idempotency_key(input: dict[str, Any]) -> str | None:
        return key(**input) if key else None

    def invoke(**input: Any) -> Any:
        return tool.invoke(input)

    async def ainvoke(**input: Any) -> Any:
        return await tool.ainvoke(input)

    def run(**input: Any) -> Any:
        assert isinstance(gate, Gate)
        try:
            return gate.run(tool.name, input, invoke, idempotency_key=idempotency_key(input))
        except NotRun as e:
            raise ToolException(denial_text(tool.name, e)) from e

    async def arun(**input: Any) -> Any:
        assert isinstance(gate, AsyncGate)
        try:
            return await gate.run(tool.name, input, ainvoke, idempotency_key=idempotency_key(input))
        except NotRun as e:
            raise ToolException(denial_text(tool.name, e)) from e

    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema if tool.args_schema is not None else tool.tool_call_schema,
        func=run if isinstance(gate, Gate) else None,
        coroutine=arun if isinstance(gate, AsyncGate) else None,
        handle_tool_error=True,
    )


class ToolgateMiddleware(AgentMiddleware):
    """Decides the named tools' calls through toolgate, runs each approved call once, records its outcome.

    `interrupt_on` maps a tool name to `True`, `False` or a dict with an optional `description` (sent with the
    call), as `HumanInTheLoopMiddleware`'s does. Give a `Gate` for `invoke`/`stream`, an `AsyncGate` for
    `ainvoke`/`astream`.
    """

    def __init__(
        self,
        gate: Gate | AsyncGate,
        interrupt_on: dict[str, bool | dict[str, Any]],
        *,
        key_prefix: str = "",
    ) -> None:
        super().__init__()
        self.gate = gate
        self.interrupt_on = {name: cfg for name, cfg in interrupt_on.items() if cfg is not False}
        self.key_prefix = key_prefix

    def _gated(self, request: ToolCallRequest) -> tuple[str, dict[str, Any]] | None:
        call = request.tool_call
        config = self.interrupt_on.get(call["name"])
        if config is None:
            return None
        options: dict[str, Any] = {"idempotency_key": f"{self.key_prefix}{call['id']}"}
        if isinstance(config, dict) and isinstance(config.get("description"), str):
            options["description"] = config["description"]
        return call["name"], options

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        """Runs the call through toolgate when its tool is named, else as it is."""
        gated = self._gated(request)
        if gated is None:
            return handler(request)
        assert isinstance(self.gate, Gate), "ToolgateMiddleware needs a Gate for a synchronous run"
        name, options = gated
        call = request.tool_call
        try:
            outcome = self.gate.decide(name, call["args"], **options)
        except NotRun as e:
            return _message(call, denial_text(name, e), "error")
        if isinstance(outcome, Finished):
            return _message(call, outcome.output, "success")
        self.gate.start(outcome.call_id)
        try:
            result = handler(request.override(tool_call={**call, "args": outcome.input}))
        except Exception as e:
            self.gate.finish(outcome.call_id, error=f"{type(e).__name__}: {e}")
            raise
        error, output = _outcome(result)
        self.gate.finish(outcome.call_id, output=output, error=error)
        return result

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        """The async form of `wrap_tool_call`."""
        gated = self._gated(request)
        if gated is None:
            return await handler(request)
        assert isinstance(self.gate, AsyncGate), "ToolgateMiddleware needs an AsyncGate for an async run"
        name, options = gated
        call = request.tool_call
        try:
            outcome = await self.gate.decide(name, call["args"], **options)
        except NotRun as e:
            return _message(call, denial_text(name, e), "error")
        if isinstance(outcome, Finished):
            return _message(call, outcome.output, "success")
        await self.gate.start(outcome.call_id)
        try:
            result = await handler(request.override(tool_call={**call, "args": outcome.input}))
        except Exception as e:
            await self.gate.finish(outcome.call_id, error=f"{type(e).__name__}: {e}")
            raise
        error, output = _outcome(result)
        await self.gate.finish(outcome.call_id, output=output, error=error)
        return result


def _message(call: Any, content: Any, status: str) -> ToolMessage:
    text = content if isinstance(content, str) else str(content)
    return ToolMessage(content=text, tool_call_id=call["id"], name=call["name"], status=status)


def _outcome(result: ToolResult) -> tuple[str | None, Any]:
    """The `(error, output)` to record for what the tool node returned."""
    if isinstance(result, ToolMessage):
        if result.status == "error":
            return str(result.content), None
        return None, output_json(result.content)
    return None, output_json(repr(result))
