"""Types of the compiled JSON grammar (``_cjson.c``); see ``stream_parser``."""

from typing import Any

from ._stream_core import StreamParseError
from .events import FieldEvent

def configure(
    parse_error: type[StreamParseError],
    delta: type,
    start: type,
    end: type,
    object_start: type,
    object_end: type,
    array_start: type,
    array_end: type,
    /,
) -> None: ...

class JsonCore:
    def __init__(self, object_root: bool = False, unwrap_result: bool = False) -> None: ...
    def feed(self, chunk: str, /) -> list[FieldEvent]: ...
    def close(self) -> list[FieldEvent]: ...
    @property
    def done(self) -> bool: ...
    @property
    def value(self) -> Any: ...
    @property
    def error(self) -> StreamParseError | None: ...
