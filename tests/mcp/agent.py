"""A scripted agent: the MCP Python SDK's client, through `rcpt gate mcp`.

Usage: agent.py ERA SCRIPT -- COMMAND [ARG...]
       agent.py ERA SCRIPT -- http://HOST:PORT/PATH   (Streamable HTTP)

ERA is `legacy` (the 2025-11-25 initialize handshake) or `2026-07-28` (the
modern era: no handshake, per-request _meta). SCRIPT is a JSON file: a list
of steps, each {"op": "list"} or {"op": "call", "tool": NAME, "arguments": {...}}.
One JSON line is printed per step: the tool names listed, or the call's
isError, its text content and its _meta.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


async def main() -> None:
    era, script = sys.argv[1], sys.argv[2]
    sep = sys.argv.index("--")
    command, args = sys.argv[sep + 1], sys.argv[sep + 2 :]
    steps = json.load(open(script))
    params = command if command.startswith("http://") else StdioServerParameters(command=command, args=args)
    async with Client(params, mode=era, cache=None) as client:
        for step in steps:
            if step["op"] == "list":
                tools = await client.list_tools()
                print(json.dumps({"tools": sorted(t.name for t in tools.tools)}), flush=True)
            else:
                r = await client.call_tool(step["tool"], step.get("arguments", {}))
                text = "".join(getattr(c, "text", "") for c in r.content)
                meta = r.meta or {}
                print(json.dumps({"isError": bool(r.is_error), "text": text, "meta": meta}), flush=True)
        print(json.dumps({"protocol": client.protocol_version}), flush=True)


asyncio.run(main())
