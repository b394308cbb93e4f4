#!/usr/bin/env python3
"""The PyPI `mcp` client (pinned in scripts/e2e-mcp-gateway.sh) against `toolgate mcp-gateway` over stdio.

    python_client.py --bin TOOLGATE --workdir DIR

In front of the reference filesystem server (e2e/mcp-gateway/node_modules, on a fresh directory under DIR,
trusted), with an `elicitation_callback` that approves one `fs__write_file` (the file is written) and denies
another (`denied by the user: ...`, the file stays absent). Prints one PASS/FAIL line per check and exits
non-zero when any failed. The gateway runs as the transport's child; the transport stops it when the session
ends, and this script kills whatever is left of it by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
FS_SERVER = HERE / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
DENY_REASON = "python says no"

results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'}: {name}{'' if ok else f' ({detail})'}", flush=True)


def result_text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (Linux /proc)."""
    found: list[int] = []
    queue = [pid]
    while queue:
        parent = queue.pop(0)
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    queue.append(child)
    return found


async def run(bin_path: str, workdir: Path) -> None:
    files = workdir / "files"
    data = workdir / "data"
    files.mkdir(parents=True)
    data.mkdir(parents=True, mode=0o700)
    files = files.resolve()
    config = workdir / "gateway.toml"
    config.write_text(
        "\n".join(
            [
                "[[mcp]]",
                'name = "fs"',
                f"command = {json.dumps(shutil.which('node') or 'node')}",
                f"args = [{json.dumps(str(FS_SERVER))}, {json.dumps(str(files))}]",
                "trusted = true",
                "",
            ]
        )
    )
    approve_path = files / "approve-me.txt"
    deny_path = files / "deny-me.txt"
    asked: list[str] = []

    async def on_elicit(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = getattr(params, "message", "")
        asked.append(message)
        if "approve-me.txt" in message:
            return types.ElicitResult(action="accept", content={"decision": "approve"})
        if "deny-me.txt" in message:
            return types.ElicitResult(action="accept", content={"decision": "deny", "reason": DENY_REASON})
        return types.ElicitResult(action="decline")

    server = StdioServerParameters(
        command=bin_path,
        args=[
            "mcp-gateway",
            "--config",
            str(config),
            "--store",
            "sqlite",
            "--data-dir",
            str(data),
            "--principal",
            "e2e-py",
        ],
        env=dict(os.environ),
    )
    log = open(workdir / "gateway.log", "w")
    gateway_pids: list[int] = []
    try:
        with anyio.fail_after(120):
            async with stdio_client(server, errlog=log) as (read, write):
                # The gateway is this process's newest child: note it (and what it started) to kill by PID.
                gateway_pids.extend(descendants(os.getpid()))
                async with ClientSession(
                    read,
                    write,
                    elicitation_callback=on_elicit,
                    client_info=types.Implementation(name="e2e-python", version="1.0.0"),
                ) as session:
                    await session.initialize()
                    gateway_pids.extend(p for p in descendants(os.getpid()) if p not in gateway_pids)

                    tools = await session.list_tools()
                    names = [tool.name for tool in tools.tools]
                    check("tools/list offers fs__write_file", "fs__write_file" in names, ", ".join(names))

                    approved = await session.call_tool(
                        "fs__write_file", {"path": str(approve_path), "content": "from python"}
                    )
                    check(
                        "approved fs__write_file returns upstream's result",
                        not approved.is_error and result_text(approved) == f"Successfully wrote to {approve_path}",
                        repr(approved),
                    )
                    check(
                        "approved fs__write_file wrote the file",
                        approve_path.exists() and approve_path.read_text() == "from python",
                        f"exists={approve_path.exists()}",
                    )

                    denied = await session.call_tool("fs__write_file", {"path": str(deny_path), "content": "never"})
                    check(
                        "denied fs__write_file: `denied by the user: <reason>`",
                        bool(denied.is_error) and result_text(denied) == f"denied by the user: {DENY_REASON}",
                        repr(denied),
                    )
                    check("denied fs__write_file wrote nothing", not deny_path.exists(), f"{deny_path} exists")
                    check("each write was asked once by elicitation", len(asked) == 2, repr(asked))
    except Exception as error:  # noqa: BLE001 - reported as a failed check
        check("the session ran to the end", False, f"{type(error).__name__}: {error}")
    finally:
        log.close()
        for pid in gateway_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the toolgate command")
    parser.add_argument("--workdir", required=True, help="an empty directory for the config, data and files")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    anyio.run(run, str(Path(args.bin).resolve()), workdir)
    failed = [name for name, ok, _ in results if not ok]
    print(f"python-client: {len(results) - len(failed)} checks passed, {len(failed)} failed", flush=True)
    if not results:
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
