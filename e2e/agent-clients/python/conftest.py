"""Shared fixtures of the Python half of the agent-clients suite (scripts/e2e-agent-clients.sh).

The suite starts one `toolgate serve` with e2e/agent-clients/server/config.toml and a tokens file of four users
(alice runs the agents; bob and carol are the finance group; erin is nobody's approver) and passes its URL in
TOOLGATE_E2E_URL. Each test marks its calls' inputs with a fresh `memo`, so it finds its own approvals in the
inbox and the tests share the server without seeing each other's calls.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

URL = os.environ.get("TOOLGATE_E2E_URL", "")
TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "carol": "tok-carol", "erin": "tok-erin"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not URL:
        raise pytest.UsageError("TOOLGATE_E2E_URL is not set: run scripts/e2e-agent-clients.sh")


@pytest.fixture
def memo() -> str:
    """A marker unique to the test, put in its calls' inputs."""
    return f"m-{uuid.uuid4().hex[:12]}"


class Inbox:
    """The inbox as a person uses it: `GET /api/approvals` and `POST /api/approvals/{id}`."""

    def __init__(self) -> None:
        self.http = httpx.Client(base_url=URL, timeout=30)

    def approvals(self, memo: str, *, user: str = "bob", state: str = "all") -> list[dict[str, Any]]:
        response = self.http.get(
            "/api/approvals", params={"state": state, "limit": 200}, headers=auth(user)
        )
        response.raise_for_status()
        items = response.json()["approvals"]
        return [a for a in items if isinstance(a.get("input"), dict) and a["input"].get("memo") == memo]

    def wait_for(self, memo: str, *, user: str = "bob", timeout: float = 30) -> dict[str, Any]:
        """The pending approval of the test's call, once it appears."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = self.approvals(memo, user=user, state="pending")
            if pending:
                return pending[0]
            time.sleep(0.05)
        raise AssertionError(f"no pending approval with memo {memo} within {timeout} s")

    def vote(self, approval_id: str, user: str, decision: str, **extra: Any) -> httpx.Response:
        return self.http.post(
            f"/api/approvals/{approval_id}", json={"decision": decision, **extra}, headers=auth(user)
        )

    def decide_when_asked(
        self, memo: str, votes: list[tuple[str, str]], *, after: threading.Event | None = None, **extra: Any
    ) -> Callable[[], list[int]]:
        """In a thread: waits for the approval (and for `after`, when given), casts `votes` ((user, decision),
        ...) in order; returns a join that gives the votes' statuses."""
        statuses: list[int] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                approval = self.wait_for(memo)
                if after is not None and not after.wait(30):
                    raise AssertionError("the agent never signalled that it was waiting")
                for user, decision in votes:
                    statuses.append(self.vote(approval["id"], user, decision, **extra).status_code)
            except BaseException as e:  # reported by the join
                errors.append(e)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()

        def join() -> list[int]:
            thread.join(60)
            if errors:
                raise errors[0]
            return statuses

        return join


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    box = Inbox()
    yield box
    box.http.close()
