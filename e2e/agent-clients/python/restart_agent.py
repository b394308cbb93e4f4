"""An agent process for the restart tests: gates one call with a fixed key, appends a line to RUNS_FILE each
time the tool runs, prints `result: ...` and exits 0. Killed while waiting and started again with the same
arguments, it must wait on the same approval and run the tool once.

    python restart_agent.py core|langgraph MEMO RUNS_FILE
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from toolgate_client import Gate

URL = os.environ["TOOLGATE_E2E_URL"]


def run_core(memo: str, runs: Path) -> str:
    gate = Gate(URL, "tok-alice")

    @gate.gated("transfer_money", key=lambda **input: f"restart-{input['memo']}")
    def transfer_money(amount: int, memo: str) -> str:
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return transfer_money(70, memo)


def run_langgraph(memo: str, runs: Path) -> str:
    from agents_langgraph import build_agent

    agent = build_agent(Gate(URL, "tok-alice"), memo, runs, key_prefix=f"thread-{memo}:")
    state = agent.invoke({"messages": [("user", "send 70")]})
    return str(state["messages"][-1].content)


if __name__ == "__main__":
    kind, memo, runs_file = sys.argv[1:4]
    result = (run_core if kind == "core" else run_langgraph)(memo, Path(runs_file))
    print(f"result: {result}", flush=True)
