"""An agent process for the restart tests: gates one `transfer_money` call of 70 with a key fixed by MEMO, appends
a line to RUNS_FILE each time the tool runs, prints `result: ...` and exits 0. It prints `waiting` each time it
long-polls the server for the call's decision, so a test kills it only while it waits. Its calls are in the
conversation `restart-MEMO`. Killed with SIGKILL and
started again with the same arguments, it must wait on the same approval and run the tool once.

    python restart_agent.py core|langgraph|openai-agents|pydantic-ai MEMO RUNS_FILE
    python restart_agent.py zygote

`zygote` imports every framework once (seconds each), prints `ready`, then for each line `KIND MEMO RUNS_FILE
OUT_FILE` on its stdin forks an agent process as above, its output going to OUT_FILE, and answers `started
OUT_FILE PID`; it reaps each agent (`exited PID STATUS`, a negative status for a signal) and, at the end of its
stdin, kills what is left. Each agent is a process of its own, killed by its pid, that shares nothing with the
others but the imported modules: the suite pays for the imports once instead of twice per kind.

core: a function decorated by `Gate.gated`; langgraph: `create_agent` with `ToolgateMiddleware` on
LangChain's fake chat model; openai-agents: `gate_tool` and `resolve_interruptions` on a scripted `Model`;
pydantic-ai: `gated` and `resolve_deferred` on `FunctionModel`. The key is the memo's (core) or the memo's
prefix and the model's tool call id (the frameworks).
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import traceback
from pathlib import Path

import httpx

from toolgate_client import AsyncGate, Gate

URL = os.environ["TOOLGATE_E2E_URL"]
TOKEN = "tok-alice"


def _waiting(request: httpx.Request) -> None:
    if request.method == "GET" and request.url.path.startswith("/api/calls/") and "wait" in request.url.params:
        print("waiting", flush=True)


async def _awaiting(request: httpx.Request) -> None:
    _waiting(request)


def gate(memo: str) -> Gate:
    client = httpx.Client(event_hooks={"request": [_waiting]})
    return Gate(URL, TOKEN, conversation_id=f"restart-{memo}", client=client)


def async_gate(memo: str) -> AsyncGate:
    client = httpx.AsyncClient(event_hooks={"request": [_awaiting]})
    return AsyncGate(URL, TOKEN, conversation_id=f"restart-{memo}", client=client)


def run_core(memo: str, runs: Path) -> str:
    @gate(memo).gated("transfer_money", key=lambda **input: f"restart-{input['memo']}")
    def transfer_money(amount: int, memo: str) -> str:
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return transfer_money(70, memo)


def run_langgraph(memo: str, runs: Path) -> str:
    from agents_langgraph import build_agent

    agent = build_agent(gate(memo), memo, runs, key_prefix=f"thread-{memo}:")
    state = agent.invoke({"messages": [("user", "send 70")]})
    return str(state["messages"][-1].content)


def run_openai_agents(memo: str, runs: Path) -> str:
    from agents_openai import build, run

    g = async_gate(memo)
    output, _ = asyncio.run(run(build(g, memo, runs, key_prefix=f"run-{memo}:"), g, f"run-{memo}:"))
    return output


def run_pydantic_ai(memo: str, runs: Path) -> str:
    from agents_pydantic import build, run

    g = async_gate(memo)
    agent = build("transfer_money", {"amount": 70, "memo": memo}, runs, g, f"run-{memo}:")
    output, _ = asyncio.run(run(agent, g, f"run-{memo}:"))
    return output


KINDS = {
    "core": run_core,
    "langgraph": run_langgraph,
    "openai-agents": run_openai_agents,
    "pydantic-ai": run_pydantic_ai,
}



def agent(kind: str, memo: str, runs_file: str) -> None:
    result = KINDS[kind](memo, Path(runs_file))
    print(f"result: {result}", flush=True)


def fork_agent(kind: str, memo: str, runs_file: str, out_file: str) -> int:
    """A child process running `agent`, its stdout and stderr in `out_file`, its stdin closed."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        out = os.open(out_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(0)
        agent(kind, memo, runs_file)
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def zygote() -> None:
    import agents_langgraph  # noqa: F401 (imported here once, for every agent forked below)
    import agents_openai  # noqa: F401
    import agents_pydantic  # noqa: F401

    print("ready", flush=True)
    children: set[int] = set()
    pending = b""
    open_stdin = True
    while open_stdin:
        if select.select([0], [], [], 0.05)[0]:
            chunk = os.read(0, 4096)
            open_stdin = bool(chunk)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                kind, memo, runs_file, out_file = line.decode().split()
                pid = fork_agent(kind, memo, runs_file, out_file)
                children.add(pid)
                print(f"started {out_file} {pid}", flush=True)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            print(f"exited {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os._exit(0)  # no teardown of the frameworks' modules: seconds, for nothing


if __name__ == "__main__":
    if sys.argv[1:] == ["zygote"]:
        zygote()
    else:
        agent(*sys.argv[1:4])
