"""Pydantic AI: `gated` tools and `resolve_deferred` on `FunctionModel`, against a real `toolgate serve`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import TOKENS, URL, Inbox
from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolgate_client import AsyncGate
from toolgate_client.pydantic_ai import gated, resolve_deferred


def scripted(tool: str, args: dict[str, object]) -> FunctionModel:
    """Calls `tool` once, then answers with what the tool returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"tool said: {returns[-1].content}")])
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id="call_1")])

    return FunctionModel(respond)


def build(tool: str, args: dict[str, object], runs: Path, memo: str) -> tuple[Agent[None, str | DeferredToolRequests], AsyncGate]:
    gate = AsyncGate(URL, TOKENS["alice"])
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        scripted(tool, args), output_type=[str, DeferredToolRequests]
    )

    @agent.tool(name=tool)
    @gated(gate, name=tool, key_prefix=f"{memo}:")
    async def money(ctx: RunContext[None], amount: int, memo: str) -> str:
        """Moves money."""
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return agent, gate


async def run(agent: Agent[None, str | DeferredToolRequests], gate: AsyncGate, memo: str) -> tuple[str, int]:
    result = await agent.run("send it")
    deferrals = 0
    while isinstance(result.output, DeferredToolRequests):
        deferrals += 1
        answers = await resolve_deferred(gate, result.output, key_prefix=f"{memo}:", timeout=30)
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)
    return str(result.output), deferrals


def test_an_approved_call_runs_once_and_its_result_reaches_the_model(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    agent, gate = build("transfer_money", {"amount": 70, "memo": memo}, runs, memo)
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    assert asyncio.run(run(agent, gate, memo)) == ("tool said: sent 70", 1)
    assert join() == [200]
    assert runs.read_text().splitlines() == [memo]


def test_an_edit_by_the_approver_is_what_runs(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    agent, gate = build("transfer_money", {"amount": 900, "memo": memo}, runs, memo)
    join = inbox.decide_when_asked(memo, [("bob", "approve")], editedInput={"amount": 90, "memo": memo})
    assert asyncio.run(run(agent, gate, memo)) == ("tool said: sent 90", 1)
    join()
    assert runs.read_text().splitlines() == [memo]


def test_a_call_a_rule_allows_runs_without_deferral(memo: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    agent, gate = build("read_balance", {"amount": 1, "memo": memo}, runs, memo)
    assert asyncio.run(run(agent, gate, memo)) == ("tool said: sent 1", 0)


def test_a_denial_reaches_the_model_as_tool_denied(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    agent, gate = build("transfer_money", {"amount": 70, "memo": memo}, runs, memo)
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    output, deferrals = asyncio.run(run(agent, gate, memo))
    join()
    assert deferrals == 1 and output.startswith("tool said: The call to `transfer_money` was not run: denied:")
    assert "not this month" in output and not runs.exists()


def test_a_rule_denial_reaches_the_model_at_once(memo: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    agent, gate = build("delete_account", {"amount": 1, "memo": memo}, runs, memo)
    output, deferrals = asyncio.run(run(agent, gate, memo))
    assert deferrals == 0 and "accounts are closed by support" in output and not runs.exists()
