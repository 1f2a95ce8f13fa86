"""An MCP server on Streamable HTTP (or stdio), built with the Python mcp SDK,
for the tests of `rcpt gate mcp --listen` (both eras).

Usage: http_server.py PORT   (Streamable HTTP at http://127.0.0.1:PORT/mcp)
       http_server.py stdio  (the same tools on stdio: what `gate mcp pin` reads)
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("files")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_file(path: str) -> str:
    """Read a text file."""
    with open(path) as f:
        return f.read()


@server.tool()
def write_file(path: str, content: str) -> str:
    """Write a text file."""
    with open(path, "w") as f:
        f.write(content)
    return "wrote " + path


if sys.argv[1] == "stdio":
    server.run()
else:
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
