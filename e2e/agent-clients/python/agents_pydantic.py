"""A Pydantic AI agent on `FunctionModel` (plain and streamed), with one money tool that toolgate gates through
`gated`. The tool appends to a runs file, so a test counts its runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from toolgate_client import AsyncGate
from toolgate_client.pydantic_ai import gated, resolve_deferred

PayAgent = Agent[None, str | DeferredToolRequests]


def _returned(messages: list[ModelMessage]) -> str | None:
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    return f"tool said: {returns[-1].content}" if returns else None


def scripted(tool: str, args: dict[str, object]) -> FunctionModel:
    """Calls `tool` once, then answers with what the tool returned; streamed, the same in chunks."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = _returned(messages)
        if text is not None:
            return ModelResponse(parts=[TextPart(text)])
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id="call_1")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        text = _returned(messages)
        if text is not None:
            words = text.split(" ")
            yield words[0]
            for word in words[1:]:
                yield " " + word
            return
        yield {0: DeltaToolCall(name=tool, tool_call_id="call_1")}
        yield {0: DeltaToolCall(json_args=ToolCallPart(tool, args).args_as_json_str())}

    return FunctionModel(respond, stream_function=stream)


def build(tool: str, args: dict[str, object], runs: Path, gate: AsyncGate, key_prefix: str) -> PayAgent:
    agent: PayAgent = Agent(scripted(tool, args), output_type=[str, DeferredToolRequests])

    @agent.tool(name=tool)
    @gated(gate, name=tool, key_prefix=key_prefix)
    async def money(ctx: RunContext[None], amount: int, memo: str) -> str:
        """Moves money."""
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return agent


async def run(agent: PayAgent, gate: AsyncGate, key_prefix: str) -> tuple[str, int]:
    """`agent.run` until no deferred call is left, each answered through toolgate; the output and the deferrals."""
    result = await agent.run("send it")
    deferrals = 0
    while isinstance(result.output, DeferredToolRequests):
        deferrals += 1
        answers = await resolve_deferred(gate, result.output, key_prefix=key_prefix, timeout=30)
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)
    return str(result.output), deferrals


async def run_stream(agent: PayAgent, gate: AsyncGate, key_prefix: str) -> tuple[str, list[list[str]]]:
    """`agent.run_stream` until no deferred call is left, each answered through toolgate; the output and each
    streamed run's outputs as they came (`deferred` for the tool requests, else the text so far)."""
    rounds: list[list[str]] = []
    history: list[ModelMessage] | None = None
    answers = None
    while True:
        prompt = "send it" if history is None else None
        async with agent.run_stream(prompt, message_history=history, deferred_tool_results=answers) as result:
            outputs = [o async for o in result.stream_output(debounce_by=None)]
            history = result.all_messages()
        rounds.append(["deferred" if isinstance(o, DeferredToolRequests) else o for o in outputs])
        output = outputs[-1]
        if not isinstance(output, DeferredToolRequests):
            return output, rounds
        answers = await resolve_deferred(gate, output, key_prefix=key_prefix, timeout=30)
