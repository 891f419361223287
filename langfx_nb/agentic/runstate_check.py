"""The strict reader of a saved ``RunState``, and its signature.

A state read back is data from storage a program may not fully trust (a file, a database
row, a queue, a browser). ``read_state`` accepts only the shape ``RunState.to_json`` writes:
every field present and of its type, no unknown fields, a known integer version, at most
one call per tool-call id in the batch, and the batch equal to the model's tool calls in
the transcript's last turn (ids, names and arguments, in order). Anything else is one
``InvalidRunStateError`` whose message names the place (``batch[0].args``) and never the
values, which may be long or secret.

The signature is HMAC-SHA256 (``hmac``, ``hashlib``) over canonical JSON (keys sorted, no
spaces, UTF-8) of everything but the ``mac`` field, compared with ``hmac.compare_digest``.
It proves the state was written by a holder of the key and not changed since; it does not
stop the same signed state being resumed again in another process (see
``RunState.fingerprint``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Mapping, Set
from typing import Any, NoReturn

from ..errors import InvalidRunStateError
from ..messages import AIMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage
from .runstate_records import (
    RUN_STATE_FORMAT,
    RUN_STATE_VERSION,
    AgentConfig,
    BatchCall,
    Key,
    RunProgress,
    SavedDecision,
)

__all__ = ["canonical_json", "check_signature", "read_state", "sign"]

MAC_PREFIX = "hmac-sha256:"
READABLE_VERSIONS = (1, RUN_STATE_VERSION)

_TOP = {
    *("format", "version", "id", "created_at", "node_id"),
    *("agent", "transcript", "batch", "progress"),
}
_TOP_OPTIONAL = {"trace", "traceparent", "mac"}
_AGENT = {"name", "prompt", "instructions", "tools", "limits"}
_AGENT_OPTIONAL = {"parallel_tools", "stream", "output", "repair", "protocol"}
_PROGRESS = {"steps", "tool_calls", "budget_used", "agent_nodes", "repairs"}
_BUDGET = {"input_tokens", "output_tokens", "total_tokens", "cost"}
_CALL = {"call_id", "name", "args", "decision"}
_ROLES = (UserMessage, AIMessage, SystemMessage, ToolMessage)


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: keys sorted, no spaces, text as is (not escaped)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(data: Mapping[str, Any]) -> bytes:
    """The signed bytes: the state's canonical JSON without ``mac``, UTF-8."""
    return canonical_json({k: v for k, v in data.items() if k != "mac"}).encode()


def _key_bytes(key: Key) -> bytes:
    if isinstance(key, str):
        raw = key.encode("utf-8")
    elif isinstance(key, (bytes, bytearray)):
        raw = bytes(key)
    else:
        raise TypeError(f"a run state key is bytes or str, not {type(key).__name__}")
    if not raw:
        raise ValueError("a run state key must not be empty")
    return raw


def sign(data: Mapping[str, Any], key: Key) -> str:
    """The ``mac`` field for ``data`` under ``key``."""
    digest = hmac.new(_key_bytes(key), canonical(data), hashlib.sha256).hexdigest()
    return MAC_PREFIX + digest


def check_signature(data: Mapping[str, Any], key: Key) -> None:
    """``InvalidRunStateError`` unless ``data`` carries the signature ``key`` gives it."""
    mac = data.get("mac")
    if mac is None:
        raise InvalidRunStateError(
            "the run state is not signed: it carries no signature (save it with "
            "to_json(key=...) to resume it with key=...)"
        )
    expected = sign(data, key).encode()
    given = mac.encode("utf-8", "replace") if isinstance(mac, str) else b""
    if not hmac.compare_digest(given, expected):
        raise InvalidRunStateError(
            "the run state's signature does not match: it was changed after it was signed, "
            "or signed with another key"
        )


def read_state(data: Mapping[str, Any] | str, key: Key | None) -> dict[str, Any]:
    """The fields of a ``RunState`` (its constructor's keyword arguments) from its JSON
    (text or parsed), checked; with ``key``, verified. The reader builds the parts, the
    state is built by ``RunState.from_json``, so this module does not import ``runstate``."""
    if key is not None:
        _key_bytes(key)  # a bad key is the caller's mistake, not the state's
    try:
        parsed = False
        if isinstance(data, (str, bytes, bytearray)):
            parsed = True
            try:
                data = json.loads(data)  # (refuses what is nested too deeply)
            except json.JSONDecodeError as exc:
                raise InvalidRunStateError(
                    f"a run state is JSON; this text is not (line {exc.lineno}, column {exc.colno})"
                ) from None
        if not isinstance(data, Mapping) or data.get("format") != RUN_STATE_FORMAT:
            raise InvalidRunStateError("not a langfx_nb run state")
        if not parsed and key is None:
            json.dumps(data)  # data given as objects: refuse here what is nested too deeply
        if key is not None:
            check_signature(data, key)
        return _read(data, verified=key is not None)
    except RecursionError:
        raise InvalidRunStateError("the run state is nested too deeply to be read") from None


def _read(data: Mapping[str, Any], *, verified: bool) -> dict[str, Any]:
    version = data.get("version")
    if type(version) is not int:
        _fail("version", f"must be an integer, not {_kind(version)}")
    if version not in READABLE_VERSIONS:
        raise InvalidRunStateError(
            f"unsupported run state version {version} (this langfx_nb reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))})"
        )
    _fields(data, "the run state", _TOP, _TOP_OPTIONAL)
    agent = _agent(data["agent"])
    messages = _transcript(data["transcript"])
    batch = _batch(data["batch"], agent.tools)
    _matches_last_turn(batch, messages)
    trace = data.get("trace")
    if trace is not None and not isinstance(trace, Mapping):
        _fail("trace", f"must be an object or null, not {_kind(trace)}")
    mac = data.get("mac")
    if mac is not None and not isinstance(mac, str):
        _fail("mac", f"must be a string, not {_kind(mac)}")
    return {
        "id": _text(data["id"], "id"),
        "created_at": _text(data["created_at"], "created_at", empty=True),
        "node_id": _text(data["node_id"], "node_id"),
        "agent": agent,
        "transcript_json": tuple(data["transcript"]),
        "batch": batch,
        "progress": _progress(data["progress"], version),
        "trace": dict(trace) if trace is not None else None,
        "traceparent": _optional_text(data.get("traceparent"), "traceparent"),
        "verified": verified,
        "mac": mac,
        "messages": tuple(messages),
    }


# -- the parts ----------------------------------------------------------------------------
def _agent(value: Any) -> AgentConfig:
    from .limits import AgentLimits

    obj = _fields(value, "agent", _AGENT, _AGENT_OPTIONAL)
    prompt = obj["prompt"]
    if isinstance(prompt, Mapping):
        _message(prompt, "agent.prompt")
        prompt = dict(prompt)
    elif not isinstance(prompt, str):
        _fail("agent.prompt", f"must be a string or a message, not {_kind(prompt)}")
    tools = obj["tools"]
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        _fail("agent.tools", "must be a list of tool names")
    if len(set(tools)) != len(tools):
        _fail("agent.tools", "names a tool twice")
    names = {f.name for f in dataclasses.fields(AgentLimits)}
    limits = _fields(obj["limits"], "agent.limits", set(), names)
    if any(isinstance(v, bool) for v in limits.values()):
        _fail("agent.limits", "are numbers, not booleans")
    try:
        AgentLimits(**limits)
    except (TypeError, ValueError) as exc:
        _fail("agent.limits", f"are not valid limits ({exc})")
    repair = obj.get("repair", 0)
    if type(repair) is not int or repair < 0:
        _fail("agent.repair", "must be a non-negative integer")
    for flag in ("parallel_tools", "stream"):
        if type(obj.get(flag, False)) is not bool:
            _fail(f"agent.{flag}", "must be true or false")
    return AgentConfig(
        name=_text(obj["name"], "agent.name", empty=True),
        prompt=prompt,
        instructions=_optional_text(obj["instructions"], "agent.instructions"),
        tools=tuple(tools),
        limits=dict(limits),
        parallel_tools=obj.get("parallel_tools", False),
        stream=obj.get("stream", False),
        output=_optional_text(obj.get("output"), "agent.output"),
        repair=repair,
        protocol=_text(obj.get("protocol", "json"), "agent.protocol"),
    )


def _transcript(value: Any) -> list[Message[Any]]:
    if not isinstance(value, list) or not value:
        _fail("transcript", f"must be a non-empty list of messages, not {_kind(value)}")
    return [_message(turn, f"transcript[{i}]") for i, turn in enumerate(value)]


def _message(value: Any, path: str) -> Message[Any]:
    if not isinstance(value, Mapping):
        _fail(path, f"must be a message (an object), not {_kind(value)}")
    try:
        message = Message.from_json(value)
    except (KeyError, TypeError, ValueError, AttributeError, AssertionError) as exc:
        _fail(path, f"is not a message ({type(exc).__name__})")
    if not isinstance(message, _ROLES):
        _fail(path, "is not a user, ai, system or tool turn")
    return message


def _batch(value: Any, tools: tuple[str, ...]) -> tuple[BatchCall, ...]:
    if not isinstance(value, list) or not value:
        _fail("batch", f"must be a non-empty list of calls, not {_kind(value)}")
    seen: set[str] = set()
    calls = []
    for i, entry in enumerate(value):
        path = f"batch[{i}]"
        obj = _fields(entry, path, _CALL)
        call_id = _text(obj["call_id"], f"{path}.call_id")
        if call_id in seen:
            raise InvalidRunStateError(
                f"run state: {path} repeats a call: duplicate tool-call id {_short(call_id)} "
                "(ids are unique within one turn)"
            )
        seen.add(call_id)
        name = _text(obj["name"], f"{path}.name")
        if name not in tools:
            _fail(f"{path}.name", "names a tool the run was not given")
        args = obj["args"]
        if not isinstance(args, Mapping):
            _fail(f"{path}.args", f"must be an object, not {_kind(args)}")
        decision = obj["decision"]
        saved = None if decision is None else _decision(decision, f"{path}.decision")
        calls.append(BatchCall(ToolCall(call_id, name, dict(args)), saved))
    return tuple(calls)


def _decision(value: Any, path: str) -> SavedDecision:
    obj = _fields(value, path, {"outcome", "by"}, {"args", "message"})
    outcome = obj["outcome"]
    by = _optional_text(obj["by"], f"{path}.by")
    if outcome == "approve":
        if "message" in obj:
            _fail(path, "is an approval: it has no 'message'")
        args = obj.get("args")
        if args is not None and not isinstance(args, Mapping):
            _fail(f"{path}.args", f"must be an object, not {_kind(args)}")
        return SavedDecision("approve", by, None if args is None else dict(args))
    if outcome == "deny":
        if "args" in obj or "message" not in obj:
            _fail(path, "is a denial: it has a 'message' and no 'args'")
        return SavedDecision("deny", by, message=_text(obj["message"], f"{path}.message", True))
    _fail(f"{path}.outcome", "must be 'approve' or 'deny'")


def _matches_last_turn(batch: tuple[BatchCall, ...], messages: list[Message[Any]]) -> None:
    last = messages[-1]
    asked = [[c.id, c.name, c.args] for c in last.tool_calls] if isinstance(last, AIMessage) else []
    pending = [[b.call.id, b.call.name, b.call.args] for b in batch]
    if canonical_json(asked) != canonical_json(pending):
        raise InvalidRunStateError(
            "run state: the pending calls (batch) do not match the model's tool calls in the "
            "transcript's last turn (ids, names and arguments, in order)"
        )


def _progress(value: Any, version: int) -> RunProgress:
    obj = _fields(value, "progress", _PROGRESS, {"used_ids"} if version == 1 else set())
    numbers = {}
    for name in ("steps", "tool_calls", "repairs"):
        n = obj[name]
        if type(n) is not int or n < 0:
            _fail(f"progress.{name}", "must be a non-negative integer")
        numbers[name] = n
    used = obj["budget_used"]
    if used is not None:
        used = _fields(used, "progress.budget_used", set(), _BUDGET)
        for name, n in used.items():
            if isinstance(n, bool) or not isinstance(n, (int, float)) or not n >= 0:
                _fail(f"progress.budget_used.{name}", "must be a non-negative number")
        used = dict(used)
    nodes = obj["agent_nodes"]
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        _fail("progress.agent_nodes", "must be a list of node ids")
    return RunProgress(
        numbers["steps"], numbers["tool_calls"], numbers["repairs"], used, tuple(nodes)
    )


# -- helpers ------------------------------------------------------------------------------
def _fields(
    value: Any, path: str, required: Set[str], optional: Set[str] = frozenset()
) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _fail(path, f"must be an object, not {_kind(value)}")
    for name in sorted(required):
        if name not in value:
            _fail(f"{path}.{name}" if path != "the run state" else repr(name), "is missing")
    for name in value:
        if name not in required and name not in optional:
            _fail(path, f"has an unknown field {_short(name)}")
    return value


def _text(value: Any, path: str, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty):
        _fail(path, f"must be a non-empty string, not {_kind(value)}")
    return value


def _optional_text(value: Any, path: str) -> str | None:
    if value is not None and not isinstance(value, str):
        _fail(path, f"must be a string or null, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """What a value is, without the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else _kind(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _fail(path: str, what: str) -> NoReturn:
    raise InvalidRunStateError(f"run state: {path} {what}")
