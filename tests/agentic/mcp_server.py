"""A real MCP server for the tests, built with the ``mcp`` SDK.

    python mcp_server.py stdio          serve on stdin/stdout
    python mcp_server.py http           serve Streamable HTTP on 127.0.0.1, a free port,
                                        and print ``PORT <n>`` on stdout once listening

Tools: ``add`` (structured result), ``shout`` (text), ``pixel`` (an image), ``fail`` (the
tool raises: an error result), ``crash`` (the process dies mid-call), ``hang`` (never
answers), ``big`` (an answer of many megabytes), ``secret_echo`` (returns its input, to
check nothing leaks), ``count`` (a counter kept by the process: it starts again only when
the server does).

With ``LF_TEST_SCHEMAS`` set to a JSON object ``{tool: schema}``, those tools are listed with
that ``inputSchema`` instead of their own (to try hostile schemas). With
``LF_TEST_ENDLESS_PAGES`` set, every ``tools/list`` page names a next page (a server that
pages for ever).
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
from mcp.types import ListToolsResult

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

    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        result = await super()._handle_list_tools(ctx, params)
        if os.environ.get("LF_TEST_ENDLESS_PAGES"):
            page = int(params.cursor) if params is not None and params.cursor else 0
            result.next_cursor = str(page + 1)
        return result


COUNTER = [0]
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
def count() -> int:
    """One more than the last call's answer (1 for the first call since the server started)."""
    COUNTER[0] += 1
    return COUNTER[0]


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
