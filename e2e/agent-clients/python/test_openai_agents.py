"""The OpenAI Agents SDK: `gate_tool` and `resolve_interruptions` on a scripted `Model`, against a real
`toolgate serve`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from conftest import TOKENS, URL, Inbox
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from toolgate_client import AsyncGate
from toolgate_client.openai_agents import gate_tool, resolve_interruptions

set_tracing_disabled(True)  # nothing leaves the machine


class ScriptedModel(Model):
    """A model that calls `transfer_money` once, then answers with the tool's output it was given."""

    def __init__(self, memo: str, amount: int = 70) -> None:
        self.call = {"amount": amount, "memo": memo}
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        outputs = [item for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"]
        if outputs:
            text = f"tool said: {outputs[-1]['output']}"
            message = ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        call = ResponseFunctionToolCall(
            id="fc_1", call_id="call_transfer_1", type="function_call", name="transfer_money",
            arguments=json.dumps(self.call), status="completed",
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run the agent without streaming")


def transfer(runs: Path) -> FunctionTool:
    @function_tool
    def transfer_money(amount: int, memo: str) -> str:
        """Sends money."""
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return transfer_money


async def run_agent(memo: str, runs: Path, amount: int = 70) -> tuple[str, int]:
    gate = AsyncGate(URL, TOKENS["alice"])
    model = ScriptedModel(memo, amount)
    agent = Agent(name="payer", model=model, tools=[gate_tool(gate, transfer(runs), key_prefix=f"{memo}:")])
    result = await Runner.run(agent, "send it")
    interruptions = len(result.interruptions)
    while result.interruptions:
        state = await resolve_interruptions(gate, result, key_prefix=f"{memo}:", timeout=30)
        result = await Runner.run(agent, state)
    return str(result.final_output), interruptions


def test_an_approved_call_runs_once_and_its_output_reaches_the_model(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    output, interruptions = asyncio.run(run_agent(memo, tmp_path / "runs"))
    assert join() == [200]
    assert (output, interruptions) == ("tool said: sent 70", 1)
    assert (tmp_path / "runs").read_text().splitlines() == [memo]


def test_a_quorum_of_two_is_waited_for(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve"), ("carol", "approve")])
    output, _ = asyncio.run(run_agent(memo, tmp_path / "runs", amount=5000))
    assert join() == [200, 200]
    assert output == "tool said: sent 5000"
    assert (tmp_path / "runs").read_text().splitlines() == [memo]


def test_a_denial_reaches_the_model_as_the_rejection_message(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    output, _ = asyncio.run(run_agent(memo, tmp_path / "runs"))
    join()
    assert output.startswith("tool said: The call to `transfer_money` was not run: denied:")
    assert "not this month" in output
    assert not (tmp_path / "runs").exists()


def test_the_approvers_edit_is_what_runs(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve")], editedInput={"amount": 7, "memo": memo})
    output, _ = asyncio.run(run_agent(memo, tmp_path / "runs", amount=700))
    join()
    assert output == "tool said: sent 7"
    assert (tmp_path / "runs").read_text().splitlines() == [memo]
