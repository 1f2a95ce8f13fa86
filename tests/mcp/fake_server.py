"""A scripted MCP server for the proxy's protocol tests (Python 3, stdlib only).

Usage: fake_server.py TOOLS.json RECEIVED.log [slow-modern]
       (RECEIVED.log "-": record nothing; slow-modern: answer server/discover
       after 6 s, then refuse initialize with -32022 as a modern-only server)

It speaks both eras (initialize, and server/discover with per-request _meta),
lists the tools of TOOLS.json (re-read at every tools/list, so a test can
change a definition under a running server), and appends every line it
receives, as received, to RECEIVED.log (flushed and synced before it acts:
the crash trials read it to know what reached the server).

Tools (by name): write {path, content} writes a file; read {path} answers
its content; slow {path, content, ms} sleeps then writes (in a thread, the
other messages served meanwhile); crash exits at
once; progress answers after a notifications/progress; ask sends the client
a roots/list request and answers with what came back; garbage writes a line
that is not JSON before answering; fail answers isError true; boom answers
a JSON-RPC error.
"""

import json
import os
import sys
import threading
import time

TOOLS, RECEIVED = sys.argv[1], sys.argv[2]
SLOW_MODERN = sys.argv[3:] == ["slow-modern"]
locked_modern = False
log = open(RECEIVED, "a") if RECEIVED != "-" else None


OUT = threading.Lock()


def send(msg):
    with OUT:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def result(rid, text, is_error=False, modern=False):
    r = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if modern:
        r["resultType"] = "complete"
    send({"jsonrpc": "2.0", "id": rid, "result": r})


def call(rid, params, modern, lines):
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "write":
        with open(args["path"], "w") as f:
            f.write(args["content"])
        result(rid, "wrote " + args["path"], modern=modern)
    elif name == "slow":
        def later():
            time.sleep(args.get("ms", 0) / 1000)
            with open(args["path"], "w") as f:
                f.write(args["content"])
            result(rid, "wrote " + args["path"], modern=modern)
        threading.Thread(target=later, daemon=True).start()
    elif name == "read":
        with open(args["path"]) as f:
            result(rid, f.read(), modern=modern)
    elif name == "crash":
        os._exit(3)
    elif name == "progress":
        token = params.get("_meta", {}).get("progressToken")
        send({"jsonrpc": "2.0", "method": "notifications/progress",
              "params": {"progressToken": token, "progress": 1, "total": 2}})
        result(rid, "done", modern=modern)
    elif name == "ask":
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
        answer = json.loads(next(lines))
        result(rid, json.dumps(answer.get("result")), modern=modern)
    elif name == "garbage":
        with OUT:
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
        result(rid, "after garbage", modern=modern)
    elif name == "fail":
        result(rid, "it failed", is_error=True, modern=modern)
    elif name == "boom":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "boom"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "unknown tool " + str(name)}})


def lines_of(stream):
    for line in stream:
        if log is not None:
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
            os.fsync(log.fileno())
        yield line


def main():
    global locked_modern
    lines = lines_of(sys.stdin)
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        modern = "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {})
        if method is None or rid is None:
            continue
        if method == "initialize" and locked_modern:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32022, "message": "modern only",
                  "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}}})
        elif method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake", "version": "1"}}})
        elif method == "server/discover":
            if SLOW_MODERN:
                time.sleep(6)
                locked_modern = True
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}}})
        elif method == "tools/list":
            with open(TOOLS) as f:
                r = {"tools": json.load(f)}
            if modern:
                r["resultType"] = "complete"
            send({"jsonrpc": "2.0", "id": rid, "result": r})
        elif method == "tools/call":
            call(rid, params, modern, lines)
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}})


main()
