"""An OpenAI Agents SDK agent on a scripted `Model` (plain and streamed responses), with one tool that toolgate
gates through `gate_tool`. The tool appends to a runs file, so a test counts its runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolgate_client import AsyncGate
from toolgate_client.openai_agents import gate_tool, resolve_interruptions

set_tracing_disabled(True)  # nothing leaves the machine


class ScriptedModel(Model):
    """A model that calls `transfer_money` once, then answers with the tool's output it was given. Streamed, it
    sends the same output as one `response.completed` event."""

    def __init__(self, memo: str, amount: int = 70) -> None:
        self.call = {"amount": amount, "memo": memo}
        self.inputs: list[Any] = []

    def _output(self, input: Any) -> list[Any]:
        self.inputs.append(input)
        items = input if isinstance(input, list) else []
        outputs = [item for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"]
        if outputs:
            text = f"tool said: {outputs[-1]['output']}"
            return [
                ResponseOutputMessage(
                    id="msg_1",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        return [
            ResponseFunctionToolCall(
                id="fc_1",
                call_id="call_transfer_1",
                type="function_call",
                name="transfer_money",
                arguments=json.dumps(self.call),
                status="completed",
            )
        ]

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=self._output(input), usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        # `model_construct`: the SDK reads the id and the output of a completed response, nothing else.
        response = Response.model_construct(id="resp_1", output=self._output(input), usage=None)
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


def transfer(runs: Path) -> FunctionTool:
    @function_tool
    def transfer_money(amount: int, memo: str) -> str:
        """Sends money."""
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return transfer_money


def build(gate: AsyncGate, memo: str, runs: Path, *, key_prefix: str, amount: int = 70) -> Agent[Any]:
    model = ScriptedModel(memo, amount)
    return Agent(name="payer", model=model, tools=[gate_tool(gate, transfer(runs), key_prefix=key_prefix)])


async def run(agent: Agent[Any], gate: AsyncGate, key_prefix: str) -> tuple[str, int]:
    """`Runner.run` until no interruption is left, each resolved through toolgate; the final output and how many
    interruptions the first run stopped on."""
    result = await Runner.run(agent, "send it")
    interruptions = len(result.interruptions)
    while result.interruptions:
        state = await resolve_interruptions(gate, result, key_prefix=key_prefix, timeout=30)
        result = await Runner.run(agent, state)
    return str(result.final_output), interruptions


async def run_streamed(agent: Agent[Any], gate: AsyncGate, key_prefix: str) -> tuple[str, list[list[str]]]:
    """`Runner.run_streamed` until no interruption is left; the final output and each streamed run's run-item
    events (their names, with the tool output's text)."""
    result = Runner.run_streamed(agent, "send it")
    rounds: list[list[str]] = []
    while True:
        events: list[str] = []
        async for event in result.stream_events():
            if event.type == "run_item_stream_event":
                output = getattr(event.item, "output", None)
                events.append(f"{event.name}: {output}" if event.name == "tool_output" else event.name)
        rounds.append(events)
        if not result.interruptions:
            return str(result.final_output), rounds
        state = await resolve_interruptions(gate, result, key_prefix=key_prefix, timeout=30)
        result = Runner.run_streamed(agent, state)
