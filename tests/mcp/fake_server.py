#!/usr/bin/env python3
"""A small scripted MCP server for the protocol paths the npm servers do not cover.

    fake_server.py modern   speaks only 2026-07-28: answers server/discover, refuses
                            initialize, requires the _meta keys on every request
    fake_server.py silent   a pre-discovery server that never answers unknown methods
                            before initialize (the client must restart it)

Tools (one per tools/list page, so paging is exercised): `echo` {message} and `wait`
(answers only when cancelled, which it records). FAKE_MCP_LOG names a file that gets
one line per notable event (`discover`, `initialize`, `cancelled <id>`, `spawned`).
"""
import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "modern"
LOG = os.environ.get("FAKE_MCP_LOG")
MODERN = "2026-07-28"
TOOLS = [
    {"name": "echo", "description": "Echoes the message", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
    {"name": "wait", "description": "Waits until cancelled", "inputSchema": {"type": "object"}},
]


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def send(obj):
    obj["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def result(i, r):
    send({"id": i, "result": r})


def error(i, code, message, data=None):
    e = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    send({"id": i, "error": e})


log("spawned " + MODE)
initialized = False
for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, i, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "notifications/cancelled":
        log("cancelled %s" % params.get("requestId"))
        continue
    if i is None:
        continue
    if MODE == "silent" and not initialized and method != "initialize":
        continue  # an old server: says nothing to what it does not know
    if MODE == "modern":
        meta = params.get("_meta") or {}
        if meta.get("io.modelcontextprotocol/protocolVersion") != MODERN or "io.modelcontextprotocol/clientCapabilities" not in meta:
            error(i, -32022, "Unsupported protocol version", {"supported": [MODERN]})
            continue
    if method == "server/discover":
        log("discover")
        result(i, {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {"listChanged": True}},
                   "serverInfo": {"name": "fake", "version": "1"}})
    elif method == "initialize":
        log("initialize")
        if MODE == "modern":
            error(i, -32601, "Method not found")
        else:
            initialized = True
            result(i, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
    elif method == "tools/list":
        page = int(params.get("cursor") or 0)
        r = {"tools": TOOLS[page:page + 1]}
        if page + 1 < len(TOOLS):
            r["nextCursor"] = str(page + 1)
        if MODE == "modern":
            r["resultType"] = "complete"
        result(i, r)
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            r = {"content": [{"type": "text", "text": "Echo: %s" % args.get("message", "")}]}
            if MODE == "modern":
                r["resultType"] = "complete"
            result(i, r)
        elif name == "wait":
            pass  # answered never; the client cancels
        else:
            error(i, -32602, "unknown tool %s" % name)
    elif method == "ping":
        result(i, {})
    else:
        error(i, -32601, "Method not found")
