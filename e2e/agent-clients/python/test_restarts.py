"""Exactly once across restarts, for the client and each adapter: an agent process (restart_agent.py, running the
framework's real package on its fake model) is killed with SIGKILL while it waits on a gated call and started
again with the same arguments (so the same key); the approval is voted in the inbox only then. The restarted
agent must have attached to the first one's approval (one approval, by the API), the tool must have run once
(one line in the runs file) and the agent must finish with the tool's result.

The agents are forked by restart_agent.py's zygote, which imports the frameworks once for all of them; each is a
process of its own, killed by its pid. The kill-and-restart part of every kind runs at once, in threads (a
module fixture); each kind's checks are then a test of their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import URL, Inbox

HERE = Path(__file__).parent

#: The kinds of restart_agent.py, with the result each prints once the approved call ran.
RESULTS = {
    "core": "result: sent 70",
    "langgraph": "result: done",
    "openai-agents": "result: tool said: sent 70",
    "pydantic-ai": "result: tool said: sent 70",
}


class Zygote:
    """restart_agent.py's zygote: forks agent processes on request and reports their exits."""

    def __init__(self) -> None:
        command = [sys.executable, str(HERE / "restart_agent.py"), "zygote"]
        env = {**os.environ, "TOOLGATE_E2E_URL": URL}
        self.process = subprocess.Popen(
            command, env=env, cwd=HERE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.started: dict[str, int] = {}
        self.exited: dict[int, int] = {}
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            words = line.split()
            with self.changed:
                if words == ["ready"]:
                    self.ready.set()
                elif words[:1] == ["started"]:
                    self.started[words[1]] = int(words[2])
                elif words[:1] == ["exited"]:
                    self.exited[int(words[1])] = int(words[2])
                self.changed.notify_all()

    def fork(self, kind: str, memo: str, runs: Path, out: Path) -> int:
        if not self.ready.wait(120):
            raise AssertionError("the zygote never imported the frameworks")
        assert self.process.stdin is not None
        with self.changed:
            self.process.stdin.write(f"{kind} {memo} {runs} {out}\n")
            self.process.stdin.flush()
            if not self.changed.wait_for(lambda: str(out) in self.started, 30):
                raise AssertionError(f"the zygote did not fork {kind}")
            return self.started[str(out)]

    def exit_status(self, pid: int, timeout: float) -> int:
        with self.changed:
            if not self.changed.wait_for(lambda: pid in self.exited, timeout):
                raise AssertionError(f"agent {pid} still running after {timeout} s")
            return self.exited[pid]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the zygote kills what is left and exits
        self.process.wait(30)


@dataclass
class AgentProcess:
    """An agent forked by the zygote, its output in `out`."""

    zygote: Zygote
    kind: str
    memo: str
    runs: Path
    out: Path

    def __post_init__(self) -> None:
        self.pid = self.zygote.fork(self.kind, self.memo, self.runs, self.out)

    def output(self) -> str:
        return self.out.read_text() if self.out.exists() else ""

    def wait_until_waiting(self) -> None:
        """Returns once the agent long-polls for the decision (it prints `waiting`)."""
        deadline = time.monotonic() + 60
        while "waiting" not in self.output().splitlines():
            if time.monotonic() > deadline or self.pid in self.zygote.exited:
                raise AssertionError(f"{self.kind}: the agent never waited on the call:\n{self.output()}")
            time.sleep(0.02)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        assert self.zygote.exit_status(self.pid, 10) == -signal.SIGKILL

    def finish(self) -> tuple[int, str]:
        return self.zygote.exit_status(self.pid, 60), self.output()


@dataclass
class Restarted:
    """A kind's agent after the kill and the restart: the first's approval, and the second process waiting."""

    memo: str
    runs: Path
    approval_id: str
    second: AgentProcess


def kill_and_restart(zygote: Zygote, kind: str, dir: Path) -> Restarted:
    memo = f"m-{uuid.uuid4().hex[:12]}"
    runs = dir / "runs"
    inbox = Inbox()
    try:
        first = AgentProcess(zygote, kind, memo, runs, dir / "first.out")
        approval = inbox.wait_for(memo, timeout=60)
        first.wait_until_waiting()
        first.kill()
        second = AgentProcess(zygote, kind, memo, runs, dir / "second.out")
        second.wait_until_waiting()
        return Restarted(memo, runs, approval["id"], second)
    finally:
        inbox.http.close()


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Restarted | BaseException]]:
    outcomes: dict[str, Restarted | BaseException] = {}
    zygote = Zygote()
    try:
        with ThreadPoolExecutor(len(RESULTS)) as pool:
            futures = {
                kind: pool.submit(kill_and_restart, zygote, kind, tmp_path_factory.mktemp(kind)) for kind in RESULTS
            }
            for kind, future in futures.items():
                try:
                    outcomes[kind] = future.result()
                except BaseException as e:  # reported by that kind's test
                    outcomes[kind] = e
        yield outcomes
    finally:
        zygote.close()


@pytest.mark.parametrize("kind", list(RESULTS))
def test_a_killed_agent_resumes_on_the_same_approval_and_runs_once(
    kind: str, restarted: dict[str, Restarted | BaseException], inbox: Inbox
) -> None:
    outcome = restarted[kind]
    if isinstance(outcome, BaseException):
        raise outcome
    # The restarted agent waits on the first one's approval: it asked again and got the same call.
    assert [a["id"] for a in inbox.approvals(outcome.memo)] == [outcome.approval_id]
    assert inbox.vote(outcome.approval_id, "bob", "approve").status_code == 200
    returncode, out = outcome.second.finish()
    assert returncode == 0 and RESULTS[kind] in out.splitlines(), out
    assert outcome.runs.read_text().splitlines() == [outcome.memo]
    [approval] = inbox.approvals(outcome.memo)
    assert (approval["state"], approval["conversationId"]) == ("executed", f"api:restart-{outcome.memo}")
