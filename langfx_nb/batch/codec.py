"""What a run manifest stores about items and results, and what ``fn`` reads.

- **Keys**: an item's key is a hash of its canonical JSON form (sorted keys; pydantic
  models and dataclasses by their fields, tagged with their class), with ``#n`` appended
  for the n-th repeat of an identical item, so keys survive reordering and insertion. A
  str that is not JSON text is hashed as it is (its JSON form would only add quotes);
  one that is (``"1"``, ``"null"``) by its JSON form, so it never shares the key of the
  value it spells. An item that has no JSON form is refused before anything runs.
- **Results**: JSON values are stored as JSON; an instance of a class (a pydantic model, a
  dataclass, anything pydantic's ``TypeAdapter`` can dump) as its JSON under a tag
  ``module:qualname``, validated back on resume into the class of that tag that ``fn``
  declares (its return annotation, or a class its code names); the tag never makes
  anything be imported. The class's JSON schema is hashed when first stored; a manifest
  whose stored classes changed schema is refused. An infinite or NaN float is stored as
  JSON's ``Infinity`` or ``NaN``, which Python's ``json`` and the classes read back.
- **Inputs**: each stored item keeps a bounded preview of its input (``input_preview``).
- **What ``fn`` reads**: the globals its code loads (not those it assigns) and its
  closure (``named_values``), where result classes are found here and a run's identity
  (``identity.py``) finds its prompt strings, models and templates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import functools
import hashlib
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import RunManifestError
from ..redact import redact_secrets

__all__ = [
    "JSON_TAG",
    "MAX_INPUT_CHARS",
    "ResultCodec",
    "input_preview",
    "item_keys",
    "named_values",
    "target_function",
]

JSON_TAG = "json"
MAX_INPUT_CHARS = 4000
_JSON_TYPES = (str, int, float, bool, type(None), list, dict, tuple, object)


# -- item keys -------------------------------------------------------------------------------
def _tagged(value: Any) -> Any:
    """The JSON form of a value ``json`` does not know: a pydantic model or a dataclass by
    its class and fields, another mapping as a dict; ``TypeError`` otherwise."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return {"__class__": type(value).__qualname__, **dump(mode="json")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"__class__": type(value).__qualname__, **fields}
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a {type(value).__name__} has no JSON form")


_ENCODER = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_tagged
)


def storable_text(text: str) -> str:
    """``text`` as SQLite can store it: a lone surrogate (``os.listdir``'s name of a file that
    is not UTF-8) as its escape, ``\\udce9``, which a JSON text reads back as it was."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def item_keys(
    items: Sequence[Any], key: Callable[[Any], str] | None = None, *, required: bool = True
) -> list[str]:
    """One manifest key per item (see the module docstring). ``TypeError`` names the first
    item that cannot be keyed; with ``required=False`` (a batch without a manifest) such an
    item is keyed by its position, ``item-3``, which no hash is. ``ValueError`` names a
    custom ``key`` that repeats."""
    keys: list[str] = []
    if key is not None:
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            k = key(item)
            if not isinstance(k, str) or not k:
                raise TypeError(f"key(items[{i}]) must be a non-empty str, not {k!r:.60}")
            if not k.isascii():
                k = storable_text(k)  # as the manifest stores it, so a resume finds it
            if k in seen:
                raise ValueError(f"items[{seen[k]}] and items[{i}] have the same key {k!r:.60}")
            seen[k] = i
            keys.append(k)
        return keys
    repeats: dict[str, int] = {}
    encode = _ENCODER.encode
    blake2b = hashlib.blake2b
    for i, item in enumerate(items):
        try:
            text = encode(item) if not isinstance(item, str) or _is_json(item) else item
        except (ValueError, RecursionError, TypeError) as exc:
            if not required:
                keys.append(f"item-{i}")
                continue
            raise _unkeyable(i, exc) from exc
        k = blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        n = repeats.get(k, 0)
        repeats[k] = n + 1
        keys.append(k if n == 0 else f"{k}#{n}")
    return keys


def _unkeyable(i: int, exc: Exception) -> TypeError:
    if isinstance(exc, RecursionError):
        return TypeError(
            f"items[{i}] is nested too deeply: it cannot be keyed for run= (pass key=)"
        )
    if isinstance(exc, ValueError) and "Circular reference" in str(exc):  # json's words
        return TypeError(f"items[{i}] contains itself: it cannot be keyed for run= (pass key=)")
    if isinstance(exc, ValueError):
        return TypeError(f"items[{i}] holds a NaN or infinite number: it cannot be keyed")
    message = str(exc)
    if "keys must be" in message:
        message = "a mapping key is not a str, int, float, bool or None"
    return TypeError(f"items[{i}]: {message}: it cannot be keyed for run= (pass key=)")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    except RecursionError:  # nested too deeply to tell: keyed by its JSON form, as JSON is
        return True
    return True


def input_preview(item: Any) -> str:
    """What a manifest stores of an item's input, so a person can tell which input gave
    which result: its JSON form (as keyed), else its ``repr``, with credential-shaped text
    masked (``redact_secrets``), cut to ``MAX_INPUT_CHARS`` characters (ending in ``…``)."""
    try:
        text = _ENCODER.encode(item)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(item)
        except Exception:  # a repr that raises: its class is all there is to say
            text = f"<{type(item).__qualname__}>"
    text = redact_secrets(text)
    if len(text) > MAX_INPUT_CHARS:
        text = text[: MAX_INPUT_CHARS - 1] + "…"
    return text


# -- what fn reads ---------------------------------------------------------------------------
#: what loads a name from the globals (a class body nested in fn loads by ``LOAD_NAME``;
#: 3.12 adds ``LOAD_FROM_DICT_OR_GLOBALS``), and what stores one there (fn's own state)
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


def _global_names(code: types.CodeType, loads: set[str], stores: set[str]) -> None:
    """The global names ``code`` and its nested code objects load and store (not the
    attribute names that ``co_names`` lists as well). Byte code ``dis`` cannot read (made
    by hand) counts as loading every name it lists."""
    try:
        for instruction in dis.get_instructions(code):
            if instruction.opname in _LOADS:
                loads.add(instruction.argval)
            elif instruction.opname in _STORES:
                stores.add(instruction.argval)
    except (IndexError, KeyError, ValueError):
        loads.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _global_names(const, loads, stores)


def target_function(fn: Callable[..., Any]) -> Any:
    """The function that runs when ``fn`` is called (through partials, bound methods and
    callable objects)."""
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)  # a bound method: its function
    if not isinstance(target, types.FunctionType):
        target = type(target).__call__  # a callable object: its __call__
        target = getattr(target, "__func__", target)
    return target


def named_values(target: Any) -> list[tuple[str, Any]]:
    """(name, value) of each global the code of ``target`` (a function, its nested
    functions included) loads, sorted, then of its closure cells: what it reads without
    being given it (a prompt string, a model, a result class). A global the code assigns
    (``global n; n += 1``) is state it keeps, not something it is given: left out, as are
    attribute names (``row.text`` reads no global ``text``). Nothing is imported."""
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    loads: set[str] = set()
    stores: set[str] = set()
    _global_names(code, loads, stores)
    globals_ = getattr(target, "__globals__", {})
    out = [(n, globals_[n]) for n in sorted(loads - stores) if n in globals_]
    for cell_name, cell in zip(code.co_freevars, target.__closure__ or (), strict=False):
        with contextlib.suppress(ValueError):  # an empty cell
            out.append((cell_name, cell.cell_contents))
    return out


# -- results ---------------------------------------------------------------------------------
def _classes_in(annotation: Any, out: dict[str, type]) -> None:
    """The classes an annotation names (through ``X | None``, ``Annotated``, generics);
    ``Any`` counts as ``object``."""
    if annotation is typing.Any:
        annotation = object
    if isinstance(annotation, type) and not typing.get_args(annotation):
        out.setdefault(f"{annotation.__module__}:{annotation.__qualname__}", annotation)
        return
    for arg in typing.get_args(annotation):
        _classes_in(arg, out)


def return_classes(fn: Callable[..., Any]) -> dict[str, type]:
    """The classes ``fn``'s return annotation names, by tag (none without one)."""
    target = target_function(fn)
    out: dict[str, type] = {}
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # an annotation that does not resolve: the raw one, if a class
        hints = dict(getattr(target, "__annotations__", None) or {})
    _classes_in(hints.get("return"), out)
    return out


def declared_classes(fn: Callable[..., Any]) -> dict[str, type]:
    """The result classes ``fn`` declares, by tag: those of its return annotation, and the
    classes its code names (read from its globals and closure: ``session.query(prompt,
    Label)``, ``return Label(...)``). Nothing is imported."""
    out = return_classes(fn)
    for _, value in named_values(target_function(fn)):
        if isinstance(value, type):
            out.setdefault(f"{value.__module__}:{value.__qualname__}", value)
    return out


def _dump(adapter: Any, value: Any) -> str:
    """``value`` as JSON text its adapter reads back. pydantic writes an infinite or NaN float
    as ``null``, which would not validate again: a text holding ``null`` is written again
    from the value's JSON-mode dump, with JSON's ``Infinity`` and ``NaN``, which it reads."""
    text: str = adapter.dump_json(value).decode()
    if "null" in text:
        text = json.dumps(adapter.dump_python(value, mode="json"), ensure_ascii=False)
    return text


class ResultCodec:
    """Turns results into (tag, JSON text) and back; remembers each class's schema hash.

    A stored tag is decoded only into a class this run knows: one ``fn`` declares
    (``declared_classes``) or a result of this run was an instance of. A manifest is data:
    a tag never makes this process import a module or reach a class by its name.
    """

    def __init__(self, fn: Callable[..., Any] | None = None) -> None:
        self._adapters: dict[type, Any] = {}
        self._lists: dict[type, Any] = {}
        self._tags: dict[type, str] = {}
        self._encoders: dict[type, tuple[Any, str]] = {}  # class -> (adapter, tag)
        self.schemas: dict[str, str] = {}  # tag -> schema hash, of classes stored so far
        self._fn = fn
        self._declared: dict[str, type] | None = None

    def _adapter(self, cls: type) -> Any:
        adapter = self._adapters.get(cls)
        if adapter is None:
            from pydantic import TypeAdapter

            adapter = self._adapters[cls] = TypeAdapter(cls)
        return adapter

    def schema_hash(self, cls: type) -> str:
        try:
            schema = self._adapter(cls).json_schema()
        except Exception:  # no JSON schema: the class name is all we can compare
            schema = {"class": cls.__qualname__}
        text = json.dumps(schema, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def tag(self, cls: type) -> str:
        tag = self._tags.get(cls)
        if tag is None:
            tag = self._tags[cls] = f"{cls.__module__}:{cls.__qualname__}"
            self.schemas.setdefault(tag, self.schema_hash(cls))
        return tag

    def encode(self, value: Any) -> tuple[str, str]:
        """(tag, JSON text); ``TypeError`` when the value cannot be stored faithfully."""
        known = self._encoders.get(type(value))
        if known is not None:  # a class stored before: its adapter and tag
            try:
                return known[1], _dump(known[0], value)
            except Exception as exc:
                raise TypeError(
                    f"a {type(value).__qualname__} result cannot be stored in the run "
                    f"manifest: {exc}"
                ) from exc
        if value is None or isinstance(value, (str, int, float, bool, list, dict)):
            try:
                return JSON_TAG, json.dumps(value, ensure_ascii=False)  # inf, NaN: as _dump
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"a {type(value).__name__} result holding values that are not plain JSON "
                    "cannot be stored in the run manifest (return a pydantic model)"
                ) from exc
        cls = type(value)
        if "<locals>" in cls.__qualname__:
            raise TypeError(
                f"results of {cls.__qualname__} (a class defined inside a function) cannot "
                "be found again to resume: define it at module level"
            )
        try:
            adapter = self._adapter(cls)
        except Exception as exc:  # pydantic cannot describe it (no schema)
            raise TypeError(
                f"a {cls.__qualname__} result cannot be stored in the run manifest: it has no "
                "JSON form to read back (return a pydantic model, a dataclass or plain JSON)"
            ) from exc
        try:
            text = _dump(adapter, value)
        except Exception as exc:
            raise TypeError(
                f"a {cls.__qualname__} result cannot be stored in the run manifest: {exc}"
            ) from exc
        tag = self.tag(cls)
        self._encoders[cls] = (adapter, tag)
        return tag, text

    def known(self) -> dict[str, type]:
        """The classes a stored tag may name in this run, by tag."""
        if self._declared is None:
            self._declared = declared_classes(self._fn) if self._fn is not None else {}
        return {**self._declared, **{tag: cls for cls, tag in self._tags.items()}}

    def plain_allowed(self) -> bool:
        """Whether a plain JSON value may be a result of this run: not when ``fn``'s return
        annotation names only classes that are not JSON values (``-> Label``)."""
        declared = return_classes(self._fn).values() if self._fn is not None else ()
        return not declared or any(cls in _JSON_TYPES for cls in declared)

    def lookup(self, tag: str) -> type:
        """The class of a stored tag, if this run declares it (see the class docstring);
        ``RunManifestError`` otherwise."""
        found = self.known().get(tag)
        if found is None:
            module_name, _, qualname = tag.partition(":")
            raise RunManifestError(
                f"results stored as class {qualname[:100]!r} (module {module_name[:100]!r}), "
                "which this run does not declare: a stored result is read back only into a "
                "class fn returns or names (annotate fn's return type with it)"
            )
        self._tags[found] = tag
        return found

    def decode_many(self, tag: str, texts: Sequence[str]) -> list[Any]:
        """The values of ``texts`` stored under ``tag``, validated in one pass."""
        whole = "[" + ",".join(texts) + "]"
        if tag == JSON_TAG:
            return json.loads(whole)
        cls = self.lookup(tag)
        adapter = self._lists.get(cls)
        if adapter is None:
            from pydantic import TypeAdapter

            adapter = self._lists[cls] = TypeAdapter(list[cls])  # type: ignore[valid-type]
        return adapter.validate_json(whole)


def is_dataframe(value: Any) -> bool:
    """Whether ``value`` is a pandas ``DataFrame`` (or a subclass), found by its class's
    module without importing pandas, which langfx_nb does not depend on. Iterating a
    DataFrame yields its column names, never its rows: a caller refuses one as items."""
    return any(
        c.__name__ == "DataFrame" and c.__module__.partition(".")[0] == "pandas"
        for c in type(value).__mro__
    )
