"""The client's requests and its reading of answers, over httpx's mock transport (no server).

The end-to-end suite (scripts/e2e-agent-clients.sh) runs the same client and its adapters against a real
`toolgate serve`; these tests pin what is decided in the client alone: the wire names, the bearer token, the
error codes it maps, and what each call state means for the caller.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from toolgate_client import (
    AlreadyStarted,
    AsyncGate,
    CallState,
    Denied,
    Expired,
    Failed,
    Finished,
    Gate,
    ProtocolError,
    ToolgateError,
)
from toolgate_client._flow import Approved, settle

Handler = Any


def gate_with(handler: Handler) -> tuple[Gate, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)  # type: ignore[no-any-return]

    client = httpx.Client(transport=httpx.MockTransport(record))
    return Gate("http://gate.test/", "tok-alice", client=client), seen


def test_submit_sends_the_wire_names_and_the_token() -> None:
    pending = {
        "callId": "call_1",
        "decision": "pending",
        "approvalId": "apr_1",
        "approvers": ["group:finance"],
        "quorum": 2,
        "expiresAt": "2026-01-01T00:00:00Z",
        "url": "http://gate.test/approvals/apr_1",
    }
    gate, seen = gate_with(lambda _: httpx.Response(202, json=pending))
    decision = gate.submit(
        "transfer_money", {"amount": 5000}, idempotency_key="k1", conversation_id="c1", description="d", wait=90
    )
    assert seen[0].method == "POST" and seen[0].url.path == "/api/calls"
    assert seen[0].headers["authorization"] == "Bearer tok-alice"
    assert json.loads(seen[0].content) == {
        "tool": "transfer_money",
        "input": {"amount": 5000},
        "idempotencyKey": "k1",
        "conversationId": "c1",
        "description": "d",
        "wait": "60s",
    }
    assert decision.decision == "pending" and decision.approvers == ["group:finance"] and decision.quorum == 2
    assert decision.approval_id == "apr_1" and decision.raw == pending


def test_an_error_answer_keeps_its_code() -> None:
    body = {"error": {"code": "unknown_call", "message": "no such call"}}
    gate, _ = gate_with(lambda _: httpx.Response(404, json=body))
    with pytest.raises(ToolgateError) as raised:
        gate.get("call_x")
    assert (raised.value.status, raised.value.code, raised.value.message) == (404, "unknown_call", "no such call")


def test_a_second_start_is_already_started() -> None:
    body = {"error": {"code": "call_already_started", "message": "started"}}
    gate, _ = gate_with(lambda _: httpx.Response(409, json=body))
    with pytest.raises(AlreadyStarted) as raised:
        gate.start("call_1")
    assert raised.value.call_id == "call_1"


def test_an_answer_without_a_call_id_is_a_protocol_error() -> None:
    gate, _ = gate_with(lambda _: httpx.Response(200, json={"decision": "allow"}))
    with pytest.raises(ProtocolError):
        gate.submit("t", {})


def test_get_asks_the_server_to_hold_the_poll() -> None:
    gate, seen = gate_with(lambda _: httpx.Response(200, json={"callId": "call_1", "state": "pending"}))
    gate.get("call_1", wait=30)
    assert seen[0].url.params["wait"] == "30s"


def state(name: str, **fields: Any) -> CallState:
    return CallState(call_id="call_1", state=name, **fields)  # type: ignore[arg-type]


def test_what_each_state_means() -> None:
    assert settle(state("pending")) is None
    assert settle(state("approved", input={"amount": 1})) == Approved("call_1", {"amount": 1})
    assert settle(state("finished", output="done")) == Finished("call_1", "done")
    with pytest.raises(Denied) as denied:
        settle(state("denied", reason="not this month"))
    assert denied.value.reason == "not this month"
    with pytest.raises(Expired):
        settle(state("expired"))
    with pytest.raises(AlreadyStarted):
        settle(state("started"))
    with pytest.raises(AlreadyStarted) as interrupted:
        settle(state("interrupted"))
    assert interrupted.value.code == "interrupted"
    with pytest.raises(Failed):
        settle(state("finished", error="boom"))
    with pytest.raises(ProtocolError):
        settle(state("exploded"))


def test_gated_runs_the_approved_input_and_records_the_output() -> None:
    calls: list[tuple[str, str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        calls.append((request.method, request.url.path, body))
        path = request.url.path
        if path == "/api/calls":
            return httpx.Response(202, json={"callId": "call_1", "decision": "pending", "state": "pending"})
        if path == "/api/calls/call_1":
            return httpx.Response(200, json={"callId": "call_1", "state": "approved", "input": {"amount": 7}})
        return httpx.Response(200, json={"callId": "call_1", "state": "started" if path.endswith("start") else "finished"})

    gate, _ = gate_with(server)
    runs: list[int] = []

    @gate.gated("transfer_money", key=lambda amount: f"transfer-{amount}")
    def transfer(amount: int) -> dict[str, int]:
        runs.append(amount)
        return {"sent": amount}

    assert transfer(5) == {"sent": 7}  # the approver's edit is what runs
    assert runs == [7]
    assert calls[0][2] == {"tool": "transfer_money", "input": {"amount": 5}, "idempotencyKey": "transfer-5"}
    assert [c[1] for c in calls[2:]] == ["/api/calls/call_1/start", "/api/calls/call_1/finish"]
    assert calls[3][2] == {"output": {"sent": 7}}


def test_a_denied_call_never_runs() -> None:
    gate, seen = gate_with(lambda _: httpx.Response(200, json={"callId": "c", "decision": "deny", "reason": "rule no"}))
    ran = []
    with pytest.raises(Denied) as denied:
        gate.run("t", {}, lambda: ran.append(1))
    assert denied.value.reason == "rule no" and not ran and len(seen) == 1


def test_a_failing_function_is_finished_with_its_error() -> None:
    bodies: list[Any] = []

    async def server(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content) if request.content else None)
        if request.url.path == "/api/calls":
            return httpx.Response(200, json={"callId": "c", "decision": "allow"})
        if request.url.path == "/api/calls/c":
            return httpx.Response(200, json={"callId": "c", "state": "approved", "input": {}})
        return httpx.Response(200, json={"callId": "c", "state": "finished"})

    gate = AsyncGate("http://gate.test", client=httpx.AsyncClient(transport=httpx.MockTransport(server)))

    async def boom() -> None:
        raise RuntimeError("bank offline")

    with pytest.raises(RuntimeError):
        asyncio.run(gate.run("t", {}, boom))
    assert bodies[-1] == {"error": "RuntimeError: bank offline"}


def test_an_allowed_call_runs_without_asking_again() -> None:
    allowed = {"callId": "c", "decision": "allow", "state": "approved", "input": {"n": 1}, "reason": None}
    gate, seen = gate_with(lambda _: httpx.Response(200, json=allowed))
    assert gate.check("t", {"n": 1}) == {"n": 1}
    assert len(seen) == 1


def test_an_expired_call_is_expired_not_denied() -> None:
    expired = {"callId": "c", "decision": "deny", "state": "expired", "reason": "expired", "input": None}
    gate, _ = gate_with(lambda _: httpx.Response(200, json=expired))
    with pytest.raises(Expired):
        gate.check("t", {})
