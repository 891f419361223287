"""format_traceback and error_info on odd exceptions: formatting a failure never fails, and an
exception group's sub-exceptions are shown, bounded however wide or deep the group is."""

from __future__ import annotations

from langfx_nb.agentic.tracebacks import MAX_TRACEBACK_CHARS, error_info, format_traceback


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def _raised(exc: Exception) -> Exception:
    try:
        raise exc
    except Exception as caught:
        return caught


def test_an_exception_whose_str_raises_is_shown_with_a_fallback_message() -> None:
    assert error_info(BrokenStr()) == {"type": "BrokenStr", "message": "<exception str() failed>"}
    try:
        try:
            raise BrokenStr()
        except BrokenStr as cause:
            raise KeyError("k") from cause
    except KeyError as exc:
        text = format_traceback(exc)
    assert "BrokenStr: <exception str() failed>" in text
    assert text.rstrip().endswith("KeyError: 'k'")


def test_a_groups_sub_exceptions_and_their_causes_are_shown() -> None:
    try:
        try:
            raise ValueError("inner cause")
        except ValueError as cause:
            raise ExceptionGroup("two", [KeyError("a"), TypeError("b")]) from cause
    except ExceptionGroup as exc:
        text = format_traceback(exc)
    assert text.index("ValueError: inner cause") < text.index("ExceptionGroup: two")
    assert "| KeyError: 'a'" in text and "| TypeError: b" in text


def test_a_wide_and_deep_group_stays_bounded() -> None:
    def nest(depth: int) -> Exception:
        if depth == 0:
            return _raised(ValueError("leaf"))
        return ExceptionGroup(f"level {depth}", [nest(depth - 1) for _ in range(7)])

    text = format_traceback(nest(5))  # 7**5 leaves
    assert 0 < len(text) <= MAX_TRACEBACK_CHARS
    assert "more sub-exceptions" in text


def test_an_exception_twice_in_a_group_is_shown_once() -> None:
    leaf = _raised(ValueError("leaf"))
    text = format_traceback(ExceptionGroup("same", [leaf, leaf]))
    assert text.count("ValueError: leaf") == 1 and "| (shown above)" in text


class OddGroup(ExceptionGroup[Exception]):
    @property  # type: ignore[override]
    def exceptions(self) -> tuple[Exception, ...]:
        raise RuntimeError("broken")


def test_a_group_whose_exceptions_fail_is_shown_as_itself() -> None:
    text = format_traceback(OddGroup("odd", [ValueError("x")]))
    assert text.rstrip().endswith("OddGroup: odd (1 sub-exception)")


class _Loader:
    """A module loader whose ``get_source`` raises while ``broken`` (not while pytest reports)."""

    broken = False

    def get_source(self, name: str) -> str:
        if self.broken:
            raise ValueError("no source")
        raise ImportError(name)  # what linecache expects when there is none


def test_frames_whose_source_cannot_be_read_still_give_a_traceback() -> None:
    loader = _Loader()
    namespace = {"__name__": "odd_module", "__loader__": loader}
    code = compile("def f():\n    raise KeyError('k')\n", "/nonexistent/odd_module.py", "exec")
    exec(code, namespace)
    try:
        namespace["f"]()  # type: ignore[operator]
    except KeyError as exc:
        loader.broken = True
        try:
            text = format_traceback(exc)
        finally:
            loader.broken = False
    assert text.rstrip().endswith("KeyError: 'k'")
