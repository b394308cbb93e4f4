"""LangChain/LangGraph: `ToolgateMiddleware` in `create_agent` and `gate_tool` around a `BaseTool`, on
LangChain's fake chat model, against a real `toolgate serve`."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from agents_langgraph import FakeToolModel, build_agent, script, transfer_tool
from conftest import TOKENS, URL, Inbox
from langchain_core.messages import AIMessage, ToolMessage

from toolgate_client import AsyncGate, Gate
from toolgate_client.langchain import gate_tool


def tool_messages(model: FakeToolModel) -> list[ToolMessage]:
    return [m for m in model.seen[-1] if isinstance(m, ToolMessage)]


def test_an_approved_call_runs_once_and_its_result_reaches_the_model(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    model = FakeToolModel(messages=script(memo))
    agent = build_agent(Gate(URL, TOKENS["alice"]), memo, runs, key_prefix=f"{memo}:", model=model)
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    state = agent.invoke({"messages": [("user", "send 70")]})
    assert join() == [200]
    assert state["messages"][-1].content == "done"
    [result] = tool_messages(model)
    assert (result.content, result.status) == ("sent 70", "success")
    assert runs.read_text().splitlines() == [memo]


def test_a_denial_reaches_the_model_as_an_error_tool_message(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    model = FakeToolModel(messages=script(memo))
    agent = build_agent(Gate(URL, TOKENS["alice"]), memo, runs, key_prefix=f"{memo}:", model=model)
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    agent.invoke({"messages": [("user", "send 70")]})
    join()
    [result] = tool_messages(model)
    assert result.status == "error" and "not this month" in str(result.content)
    assert not runs.exists()


def test_the_async_agent_waits_for_a_quorum_of_two(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    model = FakeToolModel(messages=script(memo, amount=9000))
    gate = AsyncGate(URL, TOKENS["alice"])
    agent = build_agent(gate, memo, runs, key_prefix=f"{memo}:", model=model)
    # transfer_money over 1000 goes to the finance group, two of them.
    join = inbox.decide_when_asked(memo, [("bob", "approve"), ("carol", "approve")])
    asyncio.run(agent.ainvoke({"messages": [("user", "send 9000")]}))
    assert join() == [200, 200]
    assert [m.content for m in tool_messages(model)] == ["sent 9000"]
    assert runs.read_text().splitlines() == [memo]


def test_a_wrapped_base_tool_is_gated(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    gated = gate_tool(Gate(URL, TOKENS["alice"]), transfer_tool(runs))
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    assert gated.invoke({"amount": 5, "memo": memo}) == "sent 5"
    join()
    denied = f"{memo}-denied"
    join = inbox.decide_when_asked(denied, [("bob", "deny")], reason="no")
    message = gated.invoke({"type": "tool_call", "id": "c1", "name": "transfer_money", "args": {"amount": 5, "memo": denied}})
    join()
    assert isinstance(message, ToolMessage) and message.status == "error" and "denied: no" in str(message.content)
    assert runs.read_text().splitlines() == [memo]


def test_a_wrapped_base_tool_with_an_async_gate_waits_for_a_quorum_of_two(
    memo: str, inbox: Inbox, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gated = gate_tool(AsyncGate(URL, TOKENS["alice"]), transfer_tool(runs))
    join = inbox.decide_when_asked(memo, [("bob", "approve"), ("carol", "approve")])
    assert asyncio.run(gated.ainvoke({"amount": 5000, "memo": memo})) == "sent 5000"
    assert join() == [200, 200]
    assert runs.read_text().splitlines() == [memo]


def describe(chunk: dict[str, Any]) -> list[str]:
    """A `stream_mode="updates"` chunk as `node: what it added` lines."""
    lines = []
    for node, update in chunk.items():
        for message in (update or {}).get("messages", []):
            if isinstance(message, AIMessage) and message.tool_calls:
                lines.append(f"{node}: calls {message.tool_calls[0]['name']}")
            elif isinstance(message, ToolMessage):
                lines.append(f"{node}: {message.status}: {message.content}")
            else:
                lines.append(f"{node}: {message.content}")
    return lines


def test_a_streamed_run_waits_for_the_approval_and_streams_the_result(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    model = FakeToolModel(messages=script(memo))
    agent = build_agent(Gate(URL, TOKENS["alice"]), memo, runs, key_prefix=f"{memo}:", model=model)
    streaming = threading.Event()  # set once the stream has shown the call: bob approves only then
    join = inbox.decide_when_asked(memo, [("bob", "approve")], after=streaming)
    lines: list[str] = []
    for chunk in agent.stream({"messages": [("user", "send 70")]}, stream_mode="updates"):
        lines += describe(chunk)
        if lines and lines[0] == "model: calls transfer_money":
            streaming.set()
    assert join() == [200]
    assert lines == ["model: calls transfer_money", "tools: success: sent 70", "model: done"]
    assert [m.content for m in tool_messages(model)] == ["sent 70"]
    assert runs.read_text().splitlines() == [memo]


def test_a_denial_reaches_an_async_streamed_run_as_an_error_tool_message(
    memo: str, inbox: Inbox, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    model = FakeToolModel(messages=script(memo))
    agent = build_agent(AsyncGate(URL, TOKENS["alice"]), memo, runs, key_prefix=f"{memo}:", model=model)
    streaming = threading.Event()
    join = inbox.decide_when_asked(memo, [("bob", "deny")], after=streaming, reason="not this month")

    async def consume() -> list[str]:
        lines: list[str] = []
        async for chunk in agent.astream({"messages": [("user", "send 70")]}, stream_mode="updates"):
            lines += describe(chunk)
            streaming.set()
        return lines

    lines = asyncio.run(consume())
    assert join() == [200]
    assert lines[0] == "model: calls transfer_money" and lines[2] == "model: done"
    assert lines[1].startswith("tools: error: The call to `transfer_money` was not run: denied:")
    assert "not this month" in lines[1] and not runs.exists()
