"""A misbehaving MCP stdio server for toolgate-mcp's robustness tests.

Speaks just enough MCP (JSON-RPC lines on stdin/stdout) to be listed, then
misbehaves on purpose, tool by tool:

- echo {text}: answers normally.
- hang: never answers.
- garbage: prints a line that is not JSON, then answers with a result that is
  not a tool result.
- crash: exits at once.
- slow: sends two progress notifications, then answers.
- add_tool: adds the tool `extra` and sends notifications/tools/list_changed.
- bad.schema: has an input schema that does not compile.
- no_schema, and a tool named 42: do not decode as MCP tools.
- dotted.name/x and dotted_name_x: collide once sanitized; answer with their name.
- reject: answers with a JSON-RPC error.
- a 70-character name: is longer than providers allow.

Every tool claims readOnlyHint, so a trusted connection runs them without
approval.

Tools are listed over two pages (tools/list pagination). Every
message received is appended as a JSON line to the file named by FAKE_LOG. If the
file named by FAKE_REFUSE exists at start, the server exits at once (a
server that cannot come back).
"""

import json
import os
import sys
import time

LOG = os.environ.get("FAKE_LOG")
REFUSE = os.environ.get("FAKE_REFUSE")

if REFUSE and os.path.exists(REFUSE):
    sys.stderr.write("refusing to start: %s exists\n" % REFUSE)
    sys.exit(7)


def obj(properties=None, required=None):
    schema = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return schema


def read_only(tools):
    """Every tool claims to be read-only (the tests connect it as trusted)."""
    for tool in tools:
        tool.setdefault("annotations", {"readOnlyHint": True, "openWorldHint": False})
    return tools


PAGE_1 = read_only([
    {"name": "echo", "description": "Echo the text", "inputSchema": obj({"text": {"type": "string"}}, ["text"]),
     "annotations": {"readOnlyHint": True, "openWorldHint": False}},
    {"name": "hang", "description": "Never answers", "inputSchema": obj()},
    {"name": "garbage", "description": "Answers with garbage", "inputSchema": obj()},
    {"name": "crash", "description": "Exits", "inputSchema": obj()},
    {"name": "reject", "description": "Answers with a JSON-RPC error", "inputSchema": obj()},
])
PAGE_2 = read_only([
    {"name": "slow", "description": "Reports progress", "inputSchema": obj()},
    {"name": "add_tool", "description": "Adds a tool", "inputSchema": obj()},
    {"name": "bad.schema", "description": "Broken schema", "inputSchema": obj({"x": {"type": "nonsense"}})},
    {"name": "dotted.name/x", "description": "Sanitized", "inputSchema": obj()},
    {"name": "dotted_name_x", "description": "Collides once sanitized", "inputSchema": obj()},
    {"name": "l" * 70, "description": "Too long", "inputSchema": obj()},
    {"name": "no_schema", "description": "Has no inputSchema"},
    {"name": 42, "inputSchema": obj()},
])
extra = []


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log(message):
    if LOG:
        with open(LOG, "a") as handle:
            handle.write(json.dumps(message) + "\n")


def result(request_id, value):
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text_result(request_id, text):
    result(request_id, {"content": [{"type": "text", "text": text}]})


def call(request_id, params):
    name = params.get("name")
    arguments = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        text_result(request_id, arguments.get("text", ""))
    elif name == "hang":
        pass
    elif name == "garbage":
        sys.stdout.write("this is not JSON at all\n")
        sys.stdout.flush()
        result(request_id, {"tools": "nope"})
    elif name == "crash":
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "slow":
        for step in (1, 2):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": step, "total": 2, "message": "step %d" % step}})
            time.sleep(0.1)
        text_result(request_id, "slow done")
    elif name == "add_tool":
        if not extra:
            extra.extend(read_only([{"name": "extra", "description": "Added later", "inputSchema": obj()}]))
        text_result(request_id, "added")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif name == "extra":
        text_result(request_id, "extra ran")
    elif name in ("dotted.name/x", "dotted_name_x"):
        text_result(request_id, "called " + name)
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": "unknown tool %s" % name}})


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        log(message)
        if request_id is None:
            continue
        if method == "initialize":
            result(request_id, {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake", "version": "1.0.0"},
            })
        elif method == "tools/list":
            if params.get("cursor") == "page-2":
                result(request_id, {"tools": PAGE_2 + extra})
            else:
                result(request_id, {"tools": PAGE_1, "nextCursor": "page-2"})
        elif method == "tools/call":
            call(request_id, params)
        elif method == "ping":
            result(request_id, {})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no method %s" % method}})


main()
