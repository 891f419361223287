"""A real MCP server for the tests, built with the ``mcp`` SDK.

    python mcp_server.py stdio          serve on stdin/stdout
    python mcp_server.py http           serve Streamable HTTP on 127.0.0.1, a free port,
                                        and print ``PORT <n>`` on stdout once listening

Tools: ``add`` (structured result), ``shout`` (text), ``pixel`` (an image), ``fail`` (the
tool raises: an error result), ``crash`` (the process dies mid-call), ``hang`` (never
answers), ``big`` (an answer of many megabytes), ``secret_echo`` (returns its input, to
check nothing leaks).

With ``LF_TEST_SCHEMAS`` set to a JSON object ``{tool: schema}``, those tools are listed with
that ``inputSchema`` instead of their own (to try hostile schemas).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import sys
from typing import Any

from mcp.server.mcpserver import Image, MCPServer

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class TestServer(MCPServer):
    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        schemas = json.loads(os.environ.get("LF_TEST_SCHEMAS", "{}"))
        for tool in tools:
            if tool.name in schemas:
                tool.input_schema = schemas[tool.name]
        return tools


server = TestServer("test-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(structured_output=False)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot do that: {reason}")


@server.tool()
def crash() -> str:
    """Kills the server process."""
    os._exit(3)


@server.tool(structured_output=False)
def big(megabytes: int) -> str:
    """An answer of ``megabytes`` MB of text."""
    return "x" * (megabytes * 1024 * 1024)


@server.tool()
async def hang() -> str:
    """Never returns."""
    await asyncio.sleep(3600)
    return "late"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
        return
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    print(f"PORT {port}", flush=True)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
