"""LangChain/LangGraph: `ToolgateMiddleware` in `create_agent` and `gate_tool` around a `BaseTool`, on
LangChain's fake chat model, against a real `toolgate serve`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agents_langgraph import FakeToolModel, build_agent, script, transfer_tool
from conftest import TOKENS, URL, Inbox
from langchain_core.messages import ToolMessage

from toolgate_client import AsyncGate, Gate
from toolgate_client.langchain import gate_tool

HERE = Path(__file__).parent


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


def test_a_killed_agent_resumes_on_the_same_approval(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = [sys.executable, str(HERE / "restart_agent.py"), "langgraph", memo, str(runs)]
    env = {**os.environ, "TOOLGATE_E2E_URL": URL}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    approval = inbox.wait_for(memo)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(2)  # the second agent has asked again by now: it attached to the same call
    assert [a["id"] for a in inbox.approvals(memo)] == [approval["id"]]
    assert inbox.vote(approval["id"], "bob", "approve").status_code == 200
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0 and "result: done" in out, out
    assert runs.read_text().splitlines() == [memo]
    assert len(inbox.approvals(memo)) == 1
