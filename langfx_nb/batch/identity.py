"""What identifies a run of ``lf.batch(run=...)``: a ``RunIdentity``, stored in its manifest.

A manifest holds the results of one run identity; a later call whose identity differs is
refused (``RunManifestError``), and the error names what changed ("the model 'lm' changed
from fake:echo to fake:other", "fn's source text changed"). The identity is:

- ``fn``: ``fn``'s module and qualified name (through partials, bound methods, callable
  objects: the function that runs).
- its code: a hash of ``fn``'s source text and of the plain values (strings, numbers) it
  reads from its globals and closure or gets from a ``functools.partial`` or its
  parameters' defaults, such as a prompt string; or, when the caller passes ``version=``,
  that version instead: the caller then says when the code changed (a comment edit, a
  refactor, another Python keep the version). The source is text, not byte code, so
  another Python version keeps it (a lambda adds where its body is in the line it may
  share with another lambda); a function whose source cannot be read (made by ``exec``)
  falls back to its byte code.
- ``models``: each model ``fn`` uses, by where it is found: the session's (``lf.Session(lm,
  temperature=0)``, with its defaults, each by what it holds; the default model
  ``lf.set_default_lm`` when the session has none) and the models ``fn`` names in its
  globals, closure, partial arguments or defaults (a ``LangFunc``'s model too). A model is
  its ``provider:model`` and the sampling options that change answers (``temperature``,
  ``max_tokens``, ``seed`` ...); never a key, nor the endpoint (the same model served
  elsewhere is the same model).
- ``templates``: each ``lf.Template`` (or ``LangFunc``) ``fn`` names, by a hash of its text
  and of the plain values bound to it.

Not part of it: the helpers ``fn`` calls and objects reached through attributes; pass
``version=`` (and change it) when those change what a run computes. Nor the globals ``fn``
assigns (``global n; n += 1``): state it keeps, not values it is given.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import textwrap
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..redact import redact_secrets
from .codec import named_values, target_function

if TYPE_CHECKING:
    from ..llms.base import LanguageModel


__all__ = ["RunIdentity", "check_version", "code_digest", "run_identity", "setting_text"]

_PLAIN = (str, int, float, bool, bytes)
#: what an option shows by its qualified name (a result class, a tool function)
_NAMED = type | types.FunctionType | types.BuiltinFunctionType
#: sampling options that change no answer (prompt caching only routes the request)
_NOT_ANSWERS = frozenset({"prompt_cache", "prompt_cache_key"})


class _SessionModel(Protocol):
    """What the identity reads of an ``lf.Session`` (its model and defaults)."""

    @property
    def lm(self) -> LanguageModel | None: ...

    @property
    def defaults(self) -> Mapping[str, Any]: ...


@dataclasses.dataclass(frozen=True)
class RunIdentity:
    """What a run is (see the module docstring): compared field by field when a manifest
    is reopened. ``code`` is a hash of ``fn``'s source (``None`` with a ``version``);
    ``values`` hashes the plain values it reads by name (none with a ``version``);
    ``models`` describes each model used (``provider:model`` and answer-changing options);
    ``templates`` hashes each template's text (and bound values) by name."""

    fn: str
    version: str | None = None
    code: str | None = None
    values: Mapping[str, str] = dataclasses.field(default_factory=dict)
    models: Mapping[str, str] = dataclasses.field(default_factory=dict)
    templates: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "fn": self.fn,
            "version": self.version,
            "code": self.code,
            "values": dict(self.values),
            "models": dict(self.models),
            "templates": dict(self.templates),
        }

    @classmethod
    def from_json(cls, data: Any) -> RunIdentity:
        """The identity a manifest stored; ``ValueError`` when it is not one (a manifest is
        data: every field is checked to be text)."""

        def texts(value: Any) -> dict[str, str]:
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise ValueError("not a mapping of names to text")
            return value

        if not isinstance(data, dict) or not isinstance(data.get("fn"), str):
            raise ValueError("not a run identity")
        version, code = data.get("version"), data.get("code")
        if not isinstance(version, str | None) or not isinstance(code, str | None):
            raise ValueError("not a run identity")
        return cls(
            data["fn"],
            version,
            code,
            texts(data.get("values", {})),
            texts(data.get("models", {})),
            texts(data.get("templates", {})),
        )

    def changes(self, now: RunIdentity) -> list[str]:
        """What differs from this (stored) identity to ``now``, one phrase each; empty when
        they are the same run."""
        out: list[str] = []
        if self.fn != now.fn:
            out.append(f"fn changed from {_short(self.fn)} to {_short(now.fn)}")
        if self.version != now.version:
            out.append(f"version changed from {_version(self.version)} to {_version(now.version)}")
        elif self.version is None:
            if self.code != now.code:
                out.append("fn's source text changed")
            for name in _differ(self.values, now.values):
                out.append(f"the value of {_short(name)} that fn reads changed")
        for name in _differ(self.models, now.models):
            was, is_ = self.models.get(name), now.models.get(name)
            what = _model_slot(name)
            if was is None:
                out.append(f"{what} is new ({is_})")
            elif is_ is None:
                out.append(f"{what} ({was}) is no longer used")
            else:
                out.append(f"{what} changed from {was} to {is_}")
        for name in _differ(self.templates, now.templates):
            if name not in self.templates:
                out.append(f"the template {_short(name)} is new")
            elif name not in now.templates:
                out.append(f"the template {_short(name)} is no longer used")
            else:
                out.append(f"the template {_short(name)} changed (its text or bound values)")
        return out

    def __str__(self) -> str:
        code = f"version {self.version!r}" if self.version is not None else "its source"
        parts = [f"{self.fn} ({code})"]
        parts += [f"{_model_slot(k)}: {v}" for k, v in sorted(self.models.items())]
        parts += [f"template {k}" for k in sorted(self.templates)]
        return "; ".join(parts)


def run_identity(
    fn: Callable[..., Any], *, version: str | None = None, session: _SessionModel | None = None
) -> RunIdentity:
    """The identity of a run of ``fn`` (see the module docstring) with ``session``'s model
    (``None``: the default model, if one is set)."""
    if version is not None and not isinstance(version, str):
        raise TypeError(f"version= must be a str, not {type(version).__name__}")
    target = target_function(fn)
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    found = _named_objects(fn, target)
    models: dict[str, str] = {}
    templates: dict[str, str] = {}
    values: dict[str, str] = {}
    session_lm = _session_model(session)
    if session_lm is not None:
        models["session"] = _describe_model(session_lm, session.defaults if session else {})
    for name, value in found:
        if isinstance(value, _PLAIN):
            values[name] = _digest(repr(value))
        elif _is_template(value):
            templates[name] = _template_digest(value)
            lm = getattr(value, "lm", None)
            if _is_model(lm) and lm is not session_lm:
                models[f"{name}.lm"] = _describe_model(lm, {})
        elif _is_model(value) and value is not session_lm:
            models[name] = _describe_model(value, {})
    if version is not None:
        return RunIdentity(f"{module}.{qualname}", version, None, {}, models, templates)
    code = _digest(_code_text(target))
    return RunIdentity(f"{module}.{qualname}", None, code, values, models, templates)


def check_version(version: str | None, run: object) -> None:
    """``ValueError`` for a ``version=`` given without ``run=``: it identifies a run manifest,
    and a version that nothing reads would let a caller believe results are kept."""
    if version is not None and run is None:
        raise ValueError(
            f"version={version!r:.80} identifies a run manifest, and no run= was given: "
            "pass run='name' as well to keep the results under that version, or drop version="
        )


def code_digest(fn: Callable[..., Any]) -> str:
    """A hash of what ``fn`` does: its source text and the plain values it reads (an
    evaluator's part of a trial's key in ``lf.eval.run``)."""
    identity = run_identity(fn)
    parts = [identity.fn, identity.code, identity.values, identity.templates]
    return _digest(json.dumps(parts, sort_keys=True))


def setting_text(value: Any) -> str:
    """What a setting of a built evaluator holds, the same in every process, so that another
    setting is another scoring (``lf.eval.run``): a model with the options that change its
    answers, a pydantic model class by its name and JSON schema, a function by
    ``code_digest``, a mapping by its items so described, anything else as a refused run
    shows an option."""
    if isinstance(value, Mapping):
        return repr(sorted((str(k), _setting_leaf(v)) for k, v in value.items()))
    return _setting_leaf(value)


def _setting_leaf(value: Any) -> str:
    if _is_model(value):
        return _describe_model(value, {})
    schema_of = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema_of):
        schema = json.dumps(schema_of(), sort_keys=True, default=str)
        return f"{value.__qualname__}:{_digest(schema)[:16]}"
    if isinstance(value, types.FunctionType | functools.partial):
        return code_digest(value)
    return _option(value)


# -- what fn names ---------------------------------------------------------------------------
def _named_objects(fn: Callable[..., Any], target: Any) -> list[tuple[str, Any]]:
    """(name, value) of what ``fn`` reads from its globals and closure, its partials'
    arguments (``partial[0]``, ``partial.name``) and its parameters' default values
    (``default k``: bound when ``fn`` was defined, not in its source), in a stable order."""
    out: list[tuple[str, Any]] = []
    layer: Any = fn
    depth = 0
    while isinstance(layer, functools.partial):
        prefix = "partial" if depth == 0 else f"partial{depth}"
        out += [(f"{prefix}[{i}]", a) for i, a in enumerate(layer.args)]
        out += [(f"{prefix}.{k}", v) for k, v in sorted(layer.keywords.items())]
        layer = layer.func
        depth += 1
    code = getattr(target, "__code__", None)
    defaults = getattr(target, "__defaults__", None) or ()
    if isinstance(code, types.CodeType) and defaults:
        params = code.co_varnames[: code.co_argcount][-len(defaults) :]
        out += [(f"default {p}", v) for p, v in zip(params, defaults, strict=True)]
    kwdefaults = getattr(target, "__kwdefaults__", None) or {}
    out += [(f"default {k}", v) for k, v in sorted(kwdefaults.items())]
    out += named_values(target)
    return out


def _code_text(target: Any) -> str:
    """``target``'s source text (dedented), and for a lambda where in it its body is; its
    byte code when the source cannot be read."""
    code = getattr(target, "__code__", None)
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        if not isinstance(code, types.CodeType):
            return "none"
        parts: list[str] = []
        _code_parts(code, parts)
        return "bytecode:" + "\n".join(parts)
    text = textwrap.dedent(source)
    if isinstance(code, types.CodeType) and code.co_name == "<lambda>":
        margin = len(source.split("\n", 1)[0]) - len(text.split("\n", 1)[0])
        return f"source:{text}\nlambda body at {_body_span(code, margin)}"
    return "source:" + text


def _body_span(code: types.CodeType, margin: int) -> str:
    """Where a lambda's body is in its source (``inspect.getsource`` gives the whole lines,
    which two lambdas on one line share): the first and last (line, column) its
    instructions cover, lines counted from its first line, columns from the dedented text.
    Instructions with no extent (a function's prologue) are skipped."""
    spans = [
        (line - code.co_firstlineno, col - margin, end_line - code.co_firstlineno, end - margin)
        for line, end_line, col, end in code.co_positions()
        if line is not None and end_line is not None and col is not None and end is not None
        if (line, col) != (end_line, end)
    ]
    if not spans:
        return "?"
    start = min((s[0], s[1]) for s in spans)
    stop = max((s[2], s[3]) for s in spans)
    return f"{start[0]}:{start[1]}-{stop[0]}:{stop[1]}"


def _code_parts(code: types.CodeType, out: list[str]) -> None:
    out.append(code.co_code.hex())
    out.append(repr(code.co_names))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_parts(const, out)
        else:
            out.append(repr(const))


# -- models and templates ------------------------------------------------------------------------
def _is_model(value: Any) -> bool:
    from ..llms.base import LanguageModel

    return isinstance(value, LanguageModel)


def _is_template(value: Any) -> bool:
    from ..template import Template

    return isinstance(value, Template)


def _session_model(session: _SessionModel | None) -> Any:
    if session is not None and session.lm is not None:
        return session.lm
    from ..llms.default import default_lm

    return default_lm()


def _describe_model(lm: Any, defaults: Mapping[str, Any]) -> str:
    """``provider:model k=v ...``: the model and the options that change its answers (its
    sampling options, then the session's defaults over them), secrets masked."""
    sampling = getattr(lm, "sampling", None)
    options = sampling.to_json() if sampling is not None else {}
    options.update(defaults)
    shown = " ".join(
        f"{k}={_option(v)}" for k, v in sorted(options.items()) if k not in _NOT_ANSWERS
    )
    return redact_secrets(f"{lm.model_id} {shown}".strip())


def _option(value: Any) -> str:
    """An option as a refusal shows it: a plain value (or a list of them) by its ``repr``,
    any other by its class and the JSON form of what it holds (``_content``), so a changed
    ``system_message=SystemMessage(...)`` or ``examples=[...]`` is a change; a long one
    cut with a hash of the whole (so a change past the cut is still a change)."""
    if isinstance(value, list | tuple) and all(isinstance(v, _PLAIN) for v in value):
        text = repr(list(value))
    elif isinstance(value, _PLAIN) or value is None:
        text = repr(value)
    elif _opaque(value):
        text = f"<{type(value).__qualname__}>"
    elif isinstance(value, list | tuple | set | frozenset | Mapping | _NAMED):
        text = _content(value)
    else:
        text = f"{type(value).__qualname__}({_content(value)})"
    return text if len(text) <= 80 else f"{text[:60]}…#{_digest(text)[:8]}"


def _content(value: Any) -> str:
    """The JSON text of what ``value`` holds, the same in every process: a message by its
    parts (text parts as their text), a pydantic model or dataclass by its fields, a set
    sorted, a class or function by its qualified name, an object with no JSON form and the
    default ``repr`` by its class; credential-shaped text masked (``jsonable.walk``)."""
    from ..jsonable import UNHANDLED, Bounds, walk
    from ..messages import Message

    bounds = Bounds(redact=True)

    def special(item: Any, depth: int) -> Any:
        if isinstance(item, Message):
            parts = item.content_json()["parts"]
            return [walk(p["text"] if p["kind"] == "text" else p, bounds) for p in parts]
        if isinstance(item, set | frozenset):
            shown = [walk(v, bounds, special=special, _depth=depth + 1) for v in item]
            return sorted(shown, key=lambda v: json.dumps(v, sort_keys=True))
        if isinstance(item, _NAMED):
            return f"{item.__module__}.{item.__qualname__}"
        return f"<{type(item).__qualname__}>" if _opaque(item) else UNHANDLED

    shown = walk(value, bounds, special=special)
    return json.dumps(shown, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _opaque(value: Any) -> bool:
    """Whether ``value`` shows nothing of what it holds: no JSON form, and the default
    ``repr`` (its address, which differs in every process)."""
    return (
        getattr(type(value), "__repr__", None) is object.__repr__
        and not dataclasses.is_dataclass(value)
        and not callable(getattr(value, "model_dump", None))
        and not callable(getattr(value, "to_json", None))
    )


def _template_digest(template: Any) -> str:
    """A hash of a template's text and the plain values bound to it (``Template(text,
    tone="formal")``): what it renders."""
    bound = sorted((k, repr(v)) for k, v in template.bound.items() if isinstance(v, _PLAIN))
    return _digest(json.dumps([template.text, bound]))


# -- helpers -------------------------------------------------------------------------------------
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _differ(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _short(text: str) -> str:
    return repr(text[:120]) if len(text) > 120 else text


def _version(version: str | None) -> str:
    return "none (fn's source)" if version is None else repr(version[:80])


def _model_slot(name: str) -> str:
    return "the session's model" if name == "session" else f"the model {_short(name)}"
