"""MCP servers as tools: ``lf.mcp.stdio(command, args)`` and ``lf.mcp.http(url)``.

``async with lf.mcp.stdio(sys.executable, ["server.py"]) as server:`` starts the server
process (or opens the Streamable HTTP connection), lists its tools and gives them as
``server.tools``: ordinary ``lf.Tool`` objects an ``Agent`` uses like any other. Leaving the
block closes the connection and ends the process; nothing outlives it.

What a caller may rely on:

- Each tool's ``spec`` carries the server's own JSON schema; arguments are checked against it
  (``jsonschema``) before the policy sees the call, so a bad call never reaches the server.
  A tool whose schema could only fail at call time (not an object schema, invalid, a ``$ref``
  that is remote, points nowhere or loops, a pattern that does not compile) is left out of
  ``tools``, with a warning on the ``langfx_nb.mcp`` logger naming the tool and the reason;
  the server's other tools serve. Patterns are ECMA-262 and run under a time budget
  (``mcp_schema.PATTERN_BUDGET``, 0.1 s), so a catastrophic one is refused instead of
  freezing the event loop (``mcp_schema``).
- Listing the tools is bounded: at most ``MAX_LIST_PAGES`` pages of ``tools/list``, all
  within ``open_timeout``; a server that pages on past that fails to open with
  ``ToolExecutionError`` saying so.
- ``tool.mcp_server`` names the server; the Agent records ``source: "mcp"`` and the server
  name on the ``tool_call`` node, which is the view ``allow_tool`` receives, so a policy
  (and the approval prompt) can tell an MCP tool from a local one.
- Calls go through the ``mcp`` SDK. A result flagged ``isError`` by the server goes back to
  the model as an error result (the run goes on, the node is ``failed``); a server that dies,
  a call that exceeds ``timeout`` seconds, or a broken connection stop the run with
  ``ToolExecutionError`` (``timed_out`` for the timeout).
- A timed-out call leaves the server usable: the server is asked for the first page of its
  tools (a request every protocol version has; ``ping`` is gone from the current one),
  within ``timeout`` and at most ``RECOVERY_CHECK_TIMEOUT`` s; if it does not answer (its
  connection is stuck, e.g. still reading a huge answer) the connection is closed, the
  process ended, and the server opened again before the next call. The next call waits for
  that; a server that answers keeps its connection and its state.
- An answer larger than ``max_result_bytes`` (default 16 MiB, the bound of SSE events) is a
  ``ToolExecutionError`` naming the limit. Over HTTP the SDK stops reading an SSE event at
  the limit; over stdio the SDK reads an answer as one line before it can be measured, so
  there the size is checked on arrival and ``timeout`` bounds how long reading may take.
- Results: text blocks are joined; structured content is sent as strict JSON; images (and
  audio) become ``lf.Image``/``lf.Audio`` parts after the tool result (providers that accept
  media in tool results send them) and a short JSON description in the text.

The ``mcp`` package is an optional extra (``pip install langfx_nb[mcp]``), imported only
when a server is opened.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ExecutionTimeoutError, ToolExecutionError
from ..llms.base import ToolSpec
from ..messages import Part, ToolMessage
from .mcp_schema import ArgsValidator, SlowPatternError, check_schema
from .tools import NAME_PATTERN, Tool, field_path, strict_json

if TYPE_CHECKING:
    from ..messages import ToolCall
    from .session import Session

__all__ = ["MCPServer", "MCPTool", "http", "stdio"]

DEFAULT_TIMEOUT = 60.0
DEFAULT_OPEN_TIMEOUT = 30.0
DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024
RECOVERY_CHECK_TIMEOUT = 5.0
MAX_LIST_PAGES = 100
_log = logging.getLogger("langfx_nb.mcp")
_DEVNULL: TextIO | None = None
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _import_mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "MCP tools need the optional 'mcp' package: pip install 'langfx_nb[mcp]'"
        ) from exc
    return mcp


class MCPServer:
    """A connection to one MCP server; an async context manager that owns it.

    Made by ``lf.mcp.stdio`` or ``lf.mcp.http``. ``tools`` is available inside the block.
    """

    def __init__(
        self,
        target: Any,
        *,
        name: str,
        timeout: float | None,
        open_timeout: float = DEFAULT_OPEN_TIMEOUT,
        prefix: str = "",
        errlog: TextIO | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive (or None)")
        if open_timeout <= 0:
            raise ValueError("open_timeout must be positive")
        if max_result_bytes < 1:
            raise ValueError("max_result_bytes must be positive")
        self.name = name
        self.timeout = timeout
        self.open_timeout = open_timeout
        self.max_result_bytes = max_result_bytes
        self.prefix = prefix
        self._target = target
        self._errlog = errlog
        self._client: Any = None
        self._runner: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._tools: list[MCPTool] | None = None
        self._recovery: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        state = "open" if self._client is not None else "closed"
        return f"MCPServer({self.name!r}, {state})"

    @property
    def tools(self) -> list[MCPTool]:
        """The server's tools as ``lf.Tool`` objects (listed when the connection opened)."""
        if self._tools is None:
            raise RuntimeError(f"MCP server {self.name!r} is not open: use `async with`")
        return list(self._tools)

    async def __aenter__(self) -> MCPServer:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self, session: Session | None = None) -> MCPServer:
        """Start the server (or connect) and list its tools; idempotent. Returns ``self``.

        The connection lives in a task of its own, so it may be opened in one notebook cell
        and closed in another. With ``session``, the session owns it: ``session.dispose()``
        (the end of ``async with lf.Session(...)``) closes it.
        """
        if self._runner is None:
            _import_mcp()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._runner = asyncio.ensure_future(self._run(ready))
            try:
                await asyncio.shield(ready)
            except BaseException:
                await self.close()
                raise
        if session is not None:
            session.on_dispose(self.close)
        return self

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """Own the SDK client from entering to leaving (anyio wants both in one task)."""
        import anyio
        from mcp import Client

        try:
            async with Client(
                self._transport(), read_timeout_seconds=self.open_timeout, mode="auto"
            ) as client:
                with anyio.fail_after(self.open_timeout):
                    listed = await self._list_all(client)
                tools = []
                for entry in listed:
                    try:
                        tools.append(MCPTool(self, entry))
                    except ToolExecutionError as exc:
                        _log.warning("%s; the tool is left out", exc)
                self._client = client
                self._tools = tools
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                cause = _leaf(exc)
                ready.set_exception(
                    cause
                    if isinstance(cause, ToolExecutionError)
                    else ToolExecutionError(
                        f"could not open MCP server {self.name!r}: {type(cause).__name__}: "
                        f"{_short(cause)}"
                    )
                )
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise
        finally:
            self._client = None

    async def _list_all(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise ToolExecutionError(
            f"could not open MCP server {self.name!r}: its tools/list named more than "
            f"{MAX_LIST_PAGES} pages (MAX_LIST_PAGES)"
        )

    def _transport(self) -> Any:
        target = self._target
        if isinstance(target, str):
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(target, max_sse_event_size=self.max_result_bytes)
        from mcp.client.stdio import stdio_client

        return stdio_client(target, errlog=self._errlog or _stderr())

    async def close(self) -> None:
        """Close the connection and end the server process; idempotent."""
        recovery, self._recovery = self._recovery, None
        if recovery is not None and recovery is not asyncio.current_task():
            recovery.cancel()
            await asyncio.gather(recovery, return_exceptions=True)
        await self._close_connection()

    async def _close_connection(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stop.set()
        await asyncio.gather(runner, return_exceptions=True)

    async def call(self, name: str, args: Mapping[str, Any]) -> Any:
        """Call tool ``name`` (its server-side name) and return the SDK's ``CallToolResult``."""
        if self._recovery is not None:
            await asyncio.shield(self._recovery)
        client = self._client
        if client is None:
            raise ToolExecutionError(f"MCP server {self.name!r} is closed")
        from mcp.shared.exceptions import MCPError

        try:
            timeout = math.inf if self.timeout is None else self.timeout
            result = await client.call_tool(name, dict(args), read_timeout_seconds=timeout)
        except MCPError as exc:
            if "timed out" in str(exc):
                if self._recovery is None:
                    self._recovery = asyncio.ensure_future(self._recover(client))
                raise ExecutionTimeoutError(
                    f"MCP tool {name!r} on server {self.name!r} did not answer within "
                    f"{self.timeout:g} s"
                ) from exc
            if "byte limit" in str(exc):
                raise self._too_big(name) from exc
            raise ToolExecutionError(
                f"MCP server {self.name!r} failed during {name!r}: {_short(exc)}"
            ) from exc
        if len(result.model_dump_json().encode()) > self.max_result_bytes:
            raise self._too_big(name)
        return result

    def _too_big(self, name: str) -> ToolExecutionError:
        return ToolExecutionError(
            f"MCP tool {name!r} on server {self.name!r} answered more than "
            f"{self.max_result_bytes} bytes (max_result_bytes)"
        )

    async def _recover(self, client: Any) -> None:
        """After a timed-out call: keep the connection if the server still answers (the first
        page of its tools, fetched past any cache), else reopen it (a stuck connection would
        time out every later call)."""
        try:
            bound = min(self.timeout or RECOVERY_CHECK_TIMEOUT, RECOVERY_CHECK_TIMEOUT)
            try:
                async with asyncio.timeout(bound):
                    await client.list_tools(cache_mode="bypass")
                return
            except Exception:  # no answer, or a broken connection: start afresh
                pass
            if self._client is client:
                await self._close_connection()
                await self.open()
        finally:
            if self._recovery is asyncio.current_task():
                self._recovery = None


class MCPTool(Tool[dict[str, Any], Any]):
    """One tool of an MCP server, usable wherever an ``lf.Tool`` is."""

    source = "mcp"

    def __init__(self, server: MCPServer, listed: Any) -> None:
        self.server = server
        self.remote_name: str = listed.name
        name = server.prefix + _BAD_NAME_CHARS.sub("_", listed.name)
        if not NAME_PATTERN.match(name):
            name = ("t_" + name)[:64]
        self.name = name
        self.description = listed.description or listed.title or ""
        schema = listed.input_schema or {"type": "object"}
        try:
            check_schema(schema)
        except ValueError as exc:
            raise ToolExecutionError(
                f"MCP server {server.name!r} lists tool {listed.name!r} that cannot be used: {exc}"
            ) from None
        self.input_schema: dict[str, Any] = dict(schema)
        self.input_type = dict
        self.output_type = Any
        self.spec = ToolSpec(name, self.description, self.input_schema)
        self.execute = self._execute
        self._validator: ArgsValidator | None = None

    @property
    def mcp_server(self) -> str:
        return self.server.name

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server.name!r})"

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check the arguments against the server's JSON schema (no call is made)."""
        if self._validator is None:
            self._validator = ArgsValidator(self.input_schema)
        data = dict(args)
        try:
            errors = self._validator.errors(data)
        except SlowPatternError:
            raise ToolExecutionError(
                f"arguments for MCP tool {self.name} (server {self.server.name}) could not be "
                "checked: a pattern in the server's schema takes too long"
            ) from None
        except RecursionError:
            raise ToolExecutionError(
                f"arguments for MCP tool {self.name} (server {self.server.name}) are nested "
                "too deeply to check"
            ) from None
        if errors:
            problems = [
                f"{'.'.join(str(p) for p in e.absolute_path) or 'args'}: {e.message}"
                for e in errors[:5]
            ]
            raise ToolExecutionError(
                f"invalid arguments for MCP tool {self.name} (server {self.server.name}): "
                + "; ".join(problems),
                field_errors=[
                    {"loc": field_path(e.absolute_path), "msg": _without_value(e)} for e in errors
                ],
            )
        return data

    async def _execute(self, args: dict[str, Any], session: Session) -> Any:
        return await self.server.call(self.remote_name, args)

    def result_message(self, output: Any, call: ToolCall) -> ToolMessage[Any]:
        """Map the SDK's ``CallToolResult`` to the tool message the model gets."""
        text, media = _content(output)
        message: ToolMessage[Any] = ToolMessage(
            text, call.id, call.name, is_error=bool(output.is_error)
        )
        if media:
            message.parts.extend(media)
        return message

    def serialize_output(self, value: Any) -> str:
        return _content(value)[0]


def _content(result: Any) -> tuple[str, list[Part]]:
    """(text for the tool result, media parts) from a ``CallToolResult``."""
    from ..modalities import Audio, Image

    texts: list[str] = []
    described: list[dict[str, Any]] = []
    media: list[Part] = []
    for block in result.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            data = base64.b64decode(block.data)
            cls = Image if kind == "image" else Audio
            media.append(cls.from_bytes(data, block.mime_type))
            described.append({"type": kind, "mime_type": block.mime_type, "bytes": len(data)})
        elif kind == "resource":
            res = block.resource
            entry: dict[str, Any] = {"type": "resource", "uri": str(res.uri)}
            if getattr(res, "text", None) is not None:
                entry["text"] = res.text
            described.append(entry)
        elif kind == "resource_link":
            described.append({"type": "resource_link", "uri": str(block.uri), "name": block.name})
    structured = result.structured_content
    if structured is not None and not result.is_error:
        text = strict_json(structured)
    elif described:
        text = strict_json([*({"type": "text", "text": t} for t in texts), *described])
    else:
        text = "\n".join(texts)
    return text, media


def _stderr() -> TextIO:
    """Where the server's stderr goes: ours when it is a real file (a notebook kernel's
    stream may not be: then the process's original stderr, else nowhere)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    global _DEVNULL
    if _DEVNULL is None:  # opened once, for the life of the process
        _DEVNULL = open(os.devnull, "w")  # noqa: SIM115
    return _DEVNULL


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task-group wrappers the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "…"


def stdio(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    name: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    open_timeout: float = DEFAULT_OPEN_TIMEOUT,
    prefix: str = "",
    errlog: TextIO | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> MCPServer:
    """An MCP server run as a subprocess speaking over stdin/stdout.

    ``env`` is merged over a minimal safe environment (the SDK's default), so the parent's
    secrets are not handed to the server unless passed here. ``timeout`` bounds each call
    (seconds); ``prefix`` is put before every tool name (to keep two servers apart);
    ``open_timeout`` bounds starting the server and listing its tools; ``errlog`` receives
    the server's stderr (default: this process's stderr); ``max_result_bytes`` bounds
    one answer.
    """
    _import_mcp()
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
    )
    label = name or Path(command).name + (" " + " ".join(args) if args else "")
    return MCPServer(
        params,
        name=label[:80],
        timeout=timeout,
        open_timeout=open_timeout,
        prefix=prefix,
        errlog=errlog,
        max_result_bytes=max_result_bytes,
    )


def http(
    url: str,
    *,
    name: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    open_timeout: float = DEFAULT_OPEN_TIMEOUT,
    prefix: str = "",
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> MCPServer:
    """An MCP server reached over Streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``)."""
    _import_mcp()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"an MCP HTTP url starts with http:// or https://, not {url[:20]!r}")
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    label = name or (f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname))
    return MCPServer(
        url,
        name=label,
        timeout=timeout,
        open_timeout=open_timeout,
        prefix=prefix,
        max_result_bytes=max_result_bytes,
    )


def _without_value(error: Any) -> str:
    """A JSON-schema error's message without the value it quotes first ("'two' is not of
    type 'integer'" → "is not of type 'integer'"): field errors never carry arguments."""
    message = str(error.message)
    shown = repr(error.instance)
    if message.startswith(shown):
        message = message[len(shown) :].lstrip()
    return message[:500]
