"""Secrets in a failing item (in its exception's message, in a local variable, in its input)
reach none of what a failed item leaves behind: ``ItemError``, the item's trace node, the
run manifest's bytes, the stored trace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

import langfx_nb as lf
from langfx_nb.llms.openai import OpenAI

from ..http_server import HttpServer, Request, send

KEY = "sk-proj-A1b2C3d4E5f6G7h8"
BEARER = "Zm9vYmFyYmF6cXV4MTIzNDU2"
PASSWORD = "hunter2-Xq9"


def _everything(run: Path, result: lf.BatchResult[Any], *, errors: bool = True) -> str:
    """All a later reader can see of the run: the result's errors, its trace node records,
    each byte of the manifest's files (the WAL too), the trace loaded back."""
    parts = [repr(result.errors), json.dumps(result.to_records(), default=repr)] if errors else []
    session = result.session
    if session is not None:
        parts += [json.dumps(n.to_json(), default=repr) for n in session.root.walk()]
    for file in sorted(run.parent.glob(run.name + "*")):
        parts.append(file.read_bytes().decode("utf-8", "replace"))
    parts.append(json.dumps(lf.Session.load_trace(run).trace_json(), default=repr))
    return "\n".join(parts)


async def credential_words(row: dict[str, Any]) -> None:
    config = {"api_key": KEY, "Authorization": f"Bearer {BEARER}", "password": PASSWORD}
    raise RuntimeError(f"request refused with {config!r}")


async def test_credential_shaped_text_in_a_message_reaches_nothing(tmp_path: Path) -> None:
    run = tmp_path / "words.sqlite"
    result = await lf.batch(credential_words, [{"id": 1}], run=run, progress=False)
    error = result.errors[0]
    assert error is not None and error.type == "RuntimeError"
    assert "'api_key': '<redacted>'" in error.message and "<redacted>" in (error.traceback or "")
    seen = _everything(run, result)
    assert KEY not in seen and BEARER not in seen and PASSWORD not in seen


async def a_local_holds_it(row: dict[str, Any]) -> None:
    plain = "zz-" + PASSWORD  # a secret no pattern knows, held only by a local variable
    assert plain
    raise KeyError("name")


async def test_a_local_variables_value_is_never_in_the_traceback(tmp_path: Path) -> None:
    run = tmp_path / "local.sqlite"
    result = await lf.batch(a_local_holds_it, [{"id": 1}], run=run, progress=False)
    assert result.errors[0] is not None and "KeyError" in (result.errors[0].traceback or "")
    assert "zz-" + PASSWORD not in _everything(run, result)


async def test_a_key_in_an_input_reaches_no_file(tmp_path: Path) -> None:
    run = tmp_path / "input.sqlite"
    rows = [{"q": "x", "api_key": KEY, "headers": {"authorization": f"Bearer {BEARER}"}}]
    result = await lf.batch(credential_words, rows, run=run, progress=False)
    seen = _everything(run, result, errors=False)  # (result.inputs are the user's own items)
    assert KEY not in seen and BEARER not in seen


DSN = f"postgres://alice:{PASSWORD}@db.example.com:5432/prod"


async def connect(row: dict[str, Any]) -> None:
    raise ConnectionError(f"could not connect to {row['dsn']}")


async def test_a_password_inside_a_url_in_a_message_is_masked(tmp_path: Path) -> None:
    run = tmp_path / "dsn.sqlite"
    result = await lf.batch(connect, [{"dsn": DSN}], run=run, key=lambda r: "k", progress=False)
    error = result.errors[0]
    assert error is not None and "db.example.com" in error.message
    assert PASSWORD not in error.message and PASSWORD not in (error.traceback or "")
    assert PASSWORD not in _everything(run, result, errors=False)


async def test_a_password_inside_a_url_in_an_input_reaches_no_file(tmp_path: Path) -> None:
    async def ok(row: dict[str, Any]) -> str:
        return "done"

    run = tmp_path / "dsn-input.sqlite"
    await lf.batch(ok, [{"dsn": DSN}], run=run, progress=False)
    stored = lf.BatchResult.load(run)
    assert "db.example.com" in json.dumps(stored.inputs)
    for file in run.parent.glob(run.name + "*"):
        assert PASSWORD.encode() not in file.read_bytes(), file.name


BODY_MARK = "BODYMARK-7731"


class Refusing(HttpServer):
    """An OpenAI-wire server that refuses every request with a body quoting the prompt."""

    async def respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        status = int(json.loads(request.body)["messages"][-1]["content"].rsplit(" ", 1)[-1])
        text = f"{BODY_MARK}: rejected prompt {request.body[:60]!r}"
        body = {"error": {"message": text, "type": "invalid_request_error", "code": "bad"}}
        await send(writer, status, {"content-type": "application/json"}, json.dumps(body).encode())
        return True


async def test_a_provider_error_body_reaches_no_error_traceback_or_file(tmp_path: Path) -> None:
    server = Refusing()
    await server.listen()
    lm = OpenAI(
        "gpt-4o-mini",
        api_key="sk-test-1234567890abcdef",
        base_url=f"http://127.0.0.1:{server.port}/v1",
        transport=httpx.AsyncHTTPTransport(),
    )

    async def ask(status: int, session: lf.Session) -> str:
        return str(await session.query(f"answer with {status}", lm=lm))

    run = tmp_path / "body.sqlite"
    try:
        result = await lf.batch(ask, [400, 401, 422, 500], run=run, progress=False)
    finally:
        await lm.aclose()
        await server.aclose()
    kinds = [e.type for e in result.errors if e is not None]
    assert kinds == [
        "InvalidRequestError",
        "AuthenticationError",
        "InvalidRequestError",
        "ServerError",
    ]
    for error in result.errors:
        assert error is not None and "HTTP" in error.message
        assert "in ask" in (error.traceback or "")  # where fn made the call
    seen = _everything(run, result)
    assert BODY_MARK not in seen and "1234567890abcdef" not in seen
