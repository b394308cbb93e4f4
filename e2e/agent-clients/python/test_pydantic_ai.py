"""Pydantic AI: `gated` tools and `resolve_deferred` on `FunctionModel`, through `agent.run` and
`agent.run_stream`, against a real `toolgate serve`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents_pydantic import build, run, run_stream
from conftest import TOKENS, URL, Inbox

from toolgate_client import AsyncGate


def run_agent(tool: str, args: dict[str, object], runs: Path, memo: str) -> tuple[str, int]:
    gate = AsyncGate(URL, TOKENS["alice"])
    return asyncio.run(run(build(tool, args, runs, gate, f"{memo}:"), gate, f"{memo}:"))


def test_an_approved_call_runs_once_and_its_result_reaches_the_model(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    assert run_agent("transfer_money", {"amount": 70, "memo": memo}, runs, memo) == ("tool said: sent 70", 1)
    assert join() == [200]
    assert runs.read_text().splitlines() == [memo]


def test_a_quorum_of_two_is_waited_for(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    join = inbox.decide_when_asked(memo, [("bob", "approve"), ("carol", "approve")])
    assert run_agent("transfer_money", {"amount": 5000, "memo": memo}, runs, memo) == ("tool said: sent 5000", 1)
    assert join() == [200, 200]
    assert runs.read_text().splitlines() == [memo]


def test_an_edit_by_the_approver_is_what_runs(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    join = inbox.decide_when_asked(memo, [("bob", "approve")], editedInput={"amount": 90, "memo": memo})
    assert run_agent("transfer_money", {"amount": 900, "memo": memo}, runs, memo) == ("tool said: sent 90", 1)
    join()
    assert runs.read_text().splitlines() == [memo]


def test_a_call_a_rule_allows_runs_without_deferral(memo: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    assert run_agent("read_balance", {"amount": 1, "memo": memo}, runs, memo) == ("tool said: sent 1", 0)


def test_a_denial_reaches_the_model_as_tool_denied(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    output, deferrals = run_agent("transfer_money", {"amount": 70, "memo": memo}, runs, memo)
    join()
    assert deferrals == 1 and output.startswith("tool said: The call to `transfer_money` was not run: denied:")
    assert "not this month" in output and not runs.exists()


def test_a_rule_denial_reaches_the_model_at_once(memo: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    output, deferrals = run_agent("delete_account", {"amount": 1, "memo": memo}, runs, memo)
    assert deferrals == 0 and "accounts are closed by support" in output and not runs.exists()


def streamed(args: dict[str, object], runs: Path, memo: str) -> tuple[str, list[list[str]]]:
    gate = AsyncGate(URL, TOKENS["alice"])
    return asyncio.run(run_stream(build("transfer_money", args, runs, gate, f"{memo}:"), gate, f"{memo}:"))


def test_a_streamed_run_defers_the_call_and_streams_the_answer_once_approved(
    memo: str, inbox: Inbox, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    join = inbox.decide_when_asked(memo, [("bob", "approve")])
    output, rounds = streamed({"amount": 70, "memo": memo}, runs, memo)
    assert join() == [200]
    # The first stream ends on the deferred request; the second runs the call and streams the model's text.
    assert rounds[0] == ["deferred"] and rounds[1][0] == "tool" and rounds[1][-1] == "tool said: sent 70"
    assert output == "tool said: sent 70"
    assert runs.read_text().splitlines() == [memo]


def test_a_denial_reaches_a_streamed_run_as_tool_denied(memo: str, inbox: Inbox, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
    output, rounds = streamed({"amount": 70, "memo": memo}, runs, memo)
    join()
    assert rounds[0] == ["deferred"] and len(rounds) == 2
    assert output.startswith("tool said: The call to `transfer_money` was not run: denied:")
    assert "not this month" in output
    assert not runs.exists()
