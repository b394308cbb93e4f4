"""The Python client against a real `toolgate serve`: decisions, waits, the exactly-once claim, quorum, edits,
and its types held to the server's `/openapi.json`."""

from __future__ import annotations

import typing

import httpx
import pytest
from conftest import TOKENS, URL, Inbox

from toolgate_client import AlreadyStarted, CallDecision, CallRequest, CallState, Denied, Gate
from toolgate_client._models import wire_fields


def alice() -> Gate:
    return Gate(URL, TOKENS["alice"])


def test_a_rule_allows_and_denies_at_once(memo: str) -> None:
    with alice() as gate:
        assert gate.check("read_balance", {"memo": memo}) == {"memo": memo}
        with pytest.raises(Denied) as denied:
            gate.check("delete_account", {"memo": memo})
    assert "accounts are closed by support" in (denied.value.reason or "")


def test_a_gated_function_waits_for_its_approver_and_runs_once(memo: str, inbox: Inbox) -> None:
    runs: list[dict[str, object]] = []
    gate = alice()

    @gate.gated("transfer_money", key=lambda **input: f"transfer-{input['memo']}")
    def transfer_money(amount: int, memo: str) -> dict[str, object]:
        runs.append({"amount": amount, "memo": memo})
        return {"sent": amount}

    votes = inbox.decide_when_asked(memo, [("erin", "approve"), ("bob", "approve")])
    assert transfer_money(50, memo) == {"sent": 50}
    assert votes() == [404, 200]  # erin may not even see it; bob decides
    assert runs == [{"amount": 50, "memo": memo}]
    # The same key again: the call has run; its recorded output comes back and nothing runs twice.
    assert transfer_money(50, memo) == {"sent": 50}
    assert len(runs) == 1
    approvals = inbox.approvals(memo)
    assert len(approvals) == 1 and approvals[0]["state"] == "executed"


def test_a_second_start_is_refused(memo: str, inbox: Inbox) -> None:
    with alice() as gate:
        join = inbox.decide_when_asked(memo, [("bob", "approve")])
        approved = gate.decide("transfer_money", {"memo": memo}, idempotency_key=memo)
        join()
        started = gate.start(approved.call_id)
        assert started.state == "started"
        with pytest.raises(AlreadyStarted):
            gate.start(approved.call_id)
        finished = gate.finish(approved.call_id, output={"ok": True})
        assert (finished.state, finished.output) == ("finished", {"ok": True})


def test_a_quorum_of_two_decides_and_an_edit_is_what_runs(memo: str, inbox: Inbox) -> None:
    with alice() as gate:
        decision = gate.submit("wire_funds", {"amount": 9000, "memo": memo}, idempotency_key=memo)
        assert (decision.decision, decision.approvers, decision.quorum) == ("pending", ["group:finance"], 2)
        approval = inbox.wait_for(memo)
        assert inbox.vote(approval["id"], "bob", "approve").status_code == 200
        assert gate.get(decision.call_id, wait=1).state == "pending"  # one of two
        assert inbox.vote(approval["id"], "carol", "approve").status_code == 200
        assert gate.check("wire_funds", {"amount": 9000, "memo": memo}, idempotency_key=memo) == {
            "amount": 9000,
            "memo": memo,
        }

        other = f"{memo}-edit"
        join = inbox.decide_when_asked(other, [("bob", "approve")], editedInput={"amount": 10, "memo": other})
        assert gate.check("transfer_money", {"amount": 500, "memo": other}, timeout=30) == {"amount": 10, "memo": other}
        join()


def test_a_denial_carries_the_approvers_reason(memo: str, inbox: Inbox) -> None:
    with alice() as gate:
        join = inbox.decide_when_asked(memo, [("bob", "deny")], reason="not this month")
        with pytest.raises(Denied) as denied:
            gate.check("transfer_money", {"memo": memo}, timeout=30)
        join()
    assert "not this month" in (denied.value.reason or "")


def schema_properties(name: str) -> set[str]:
    document = httpx.get(f"{URL}/openapi.json", timeout=10).json()
    return set(document["components"]["schemas"][name]["properties"])


def test_the_client_types_match_the_servers_openapi_document() -> None:
    assert set(wire_fields(CallRequest)) == schema_properties("CallRequest")
    assert set(wire_fields(CallDecision)) == schema_properties("CallDecided") | schema_properties("CallPending")
    assert set(wire_fields(CallState)) == schema_properties("CallStatus")
    document = httpx.get(f"{URL}/openapi.json", timeout=10).json()
    schemas = document["components"]["schemas"]
    state_enum = schemas["CallStatus"]["properties"]["state"]["enum"]
    assert set(typing.get_args(typing.get_type_hints(CallState)["state"])) == set(state_enum)
    decisions = set(schemas["CallDecided"]["properties"]["decision"]["enum"])
    decisions |= set(schemas["CallPending"]["properties"]["decision"]["enum"])
    assert set(typing.get_args(typing.get_type_hints(CallDecision)["decision"])) == decisions


def test_the_stream_follows_a_call_until_it_is_decided(memo: str, inbox: Inbox) -> None:
    with alice() as gate:
        decision = gate.submit("transfer_money", {"memo": memo}, idempotency_key=memo)
        events = gate.stream(ids=[decision.call_id])
        first = next(events)  # the call as it stands
        assert (first.call_id, first.state) == (decision.call_id, "pending")
        assert inbox.vote(inbox.wait_for(memo)["id"], "bob", "approve").status_code == 200
        later = next(events)
        while not later.decided:
            later = next(events)
        events.close()
    assert (later.call_id, later.state, later.input) == (decision.call_id, "approved", {"memo": memo})
