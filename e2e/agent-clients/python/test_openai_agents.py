"""The OpenAI Agents SDK: `gate_tool` and `resolve_interruptions` on a scripted `Model`, through `Runner.run` and
`Runner.run_streamed`, against a real `toolgate serve`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents_openai import build, run, run_streamed
from conftest import TOKENS, URL, Inbox

from toolgate_client import AsyncGate


def run_agent(memo: str, runs: Path, amount: int = 70) -> tuple[str, int]:
    gate = AsyncGate(URL, TOKENS["alice"])
    return asyncio.run(run(build(gate, memo, runs, key_prefix=f"{memo}:", amount=amount), gate, f"{memo}:"))


def test_an_approved_call_runs_once_and_its_output_reaches_the_model(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    output, interruptions = run_agent(memo, tmp_path / "runs")
    assert join() == [200]
    assert (output, interruptions) == ("tool said: sent 70", 1)
    assert (tmp_path / "runs").read_text().splitlines() == [memo]


def test_a_quorum_of_two_is_waited_for(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve"), ("carol", "approve")])
    output, _ = run_agent(memo, tmp_path / "runs", amount=5000)
    assert join() == [200, 200]
    assert output == "tool said: sent 5000"
    assert (tmp_path / "runs").read_text().splitlines() == [memo]


def test_a_denial_reaches_the_model_as_the_rejection_message(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    output, _ = run_agent(memo, tmp_path / "runs")
    join()
    assert output.startswith("tool said: The call to `transfer_money` was not run: denied:")
    assert "not this month" in output
    assert not (tmp_path / "runs").exists()


def test_the_approvers_edit_is_what_runs(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve")], editedInput={"amount": 7, "memo": memo})
    output, _ = run_agent(memo, tmp_path / "runs", amount=700)
    join()
    assert output == "tool said: sent 7"
    assert (tmp_path / "runs").read_text().splitlines() == [memo]


def streamed(memo: str, runs: Path) -> tuple[str, list[list[str]]]:
    gate = AsyncGate(URL, TOKENS["alice"])
    return asyncio.run(run_streamed(build(gate, memo, runs, key_prefix=f"{memo}:"), gate, f"{memo}:"))


def test_a_streamed_run_stops_on_the_call_and_goes_on_once_it_is_approved(
    memo: str, inbox: Inbox, tmp_path: Path
) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    output, rounds = streamed(memo, tmp_path / "runs")
    assert join() == [200]
    # The first stream ends on the interruption (the call, not run); the second runs it and streams its output.
    assert rounds == [["tool_called"], ["tool_output: sent 70", "message_output_created"]]
    assert output == "tool said: sent 70"
    assert (tmp_path / "runs").read_text().splitlines() == [memo]


def test_a_denial_reaches_a_streamed_run_as_the_rejection_message(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    output, rounds = streamed(memo, tmp_path / "runs")
    join()
    denial = "The call to `transfer_money` was not run: denied:"
    assert len(rounds) == 2 and rounds[1][0].startswith(f"tool_output: {denial}")
    assert output.startswith(f"tool said: {denial}") and "not this month" in output
    assert not (tmp_path / "runs").exists()
