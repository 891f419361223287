"""Template rendering: the {{var}} subset, bound defaults, composition, modalities, errors."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

import langfx_nb as lf
from langfx_nb.messages import TextPart


def test_bound_defaults_and_call_time_override() -> None:
    t = lf.Template("Hello {{name}}!", name="world")
    assert t.render().text == "Hello world!"
    out = t.render(name="Ada")
    assert isinstance(out, lf.UserMessage)
    assert out.text == "Hello Ada!"
    assert t.render().text == "Hello world!"  # the override did not stick
    assert t.bound == {"name": "world"}


def test_vars_mapping_and_keywords_precedence() -> None:
    t = lf.Template("{{a}}{{b}}{{c}}", a=1, b=1, c=1)
    assert t.render({"b": 2, "c": 2}, c=3).text == "123"


@dataclass
class Person:
    name: str
    tags: list[str]


def test_paths_attributes_keys_and_indices() -> None:
    t = lf.Template("{{p.name}} {{ p.tags[1] }} {{d.k.j}} {{items[0]}} {{items[-1]}} {{d['x y']}}")
    out = t.render(
        p=Person("Ada", ["a", "b"]),
        d={"k": {"j": "J"}, "x y": "XY"},
        items=[10, 20, 30],
    )
    assert out.text == "Ada b J 10 30 XY"


def test_whitespace_inside_braces_and_single_braces_are_text() -> None:
    t = lf.Template('{ "a": {{  x  }} } {x} }} {')
    assert t.render(x=1).text == '{ "a": 1 } {x} }} {'


def test_non_str_values_are_stringified() -> None:
    assert lf.Template("{{n}} {{f}} {{none}}").render(n=3, f=1.5, none=None).text == "3 1.5 None"


def test_missing_variable_names_it() -> None:
    with pytest.raises(lf.TemplateError, match="'who'"):
        lf.Template("Hi {{who}}").render()


def test_missing_path_step_names_the_path() -> None:
    with pytest.raises(lf.TemplateError, match=r"'a\.b\.c'"):
        lf.Template("{{a.b.c}}").render(a={"b": {}})
    with pytest.raises(lf.TemplateError, match=r"'xs\[5\]'"):
        lf.Template("{{xs[5]}}").render(xs=[1])


def test_unclosed_braces_name_the_position() -> None:
    with pytest.raises(lf.TemplateError, match=r"line 2, column 4 \(offset 12\)"):
        lf.Template("line one\nab {{name")


@pytest.mark.parametrize("bad", ["{{}}", "{{ 1 + 2 }}", "{{a|upper}}", "{{ f(x) }}", "{{a.}}"])
def test_expressions_are_not_supported(bad: str) -> None:
    with pytest.raises(lf.TemplateError, match="invalid template variable"):
        lf.Template(bad)


def test_dunder_attributes_rejected() -> None:
    with pytest.raises(lf.TemplateError, match="dunder"):
        lf.Template("{{x.__class__}}")


def test_from_raw_str_is_literal() -> None:
    t = lf.Template.from_raw_str("{{not a var}} {{")
    assert t.render(x=1).text == "{{not a var}} {{"


def test_nested_template_rendered_with_same_vars() -> None:
    inner = lf.Template("[{{name}}]")
    outer = lf.Template("Hi {{inner}} and {{name}}", inner=inner)
    assert outer.render(name="Ada").text == "Hi [Ada] and Ada"


def test_nested_template_own_bindings_win() -> None:
    inner = lf.Template("{{x}}", x="inner")
    assert lf.Template("{{x}} {{t}}", t=inner).render(x="outer").text == "outer inner"


def test_self_interpolation_is_an_error_not_a_hang() -> None:
    t = lf.Template("{{me}}")
    with pytest.raises(lf.TemplateError, match="nested"):
        t.render(me=t)


def test_modalities_and_messages_keep_their_parts() -> None:
    img = lf.Image.from_uri("https://example.com/cat.png")
    msg = lf.UserMessage(["look: ", lf.Image.from_bytes(b"\x89PNG\r\n\x1a\nxx")])
    out = lf.Template("A {{img}} B {{msg}} C {{sub}}").render(
        img=img, msg=msg, sub=lf.Template("{{img}}!")
    )
    kinds = [type(p).__name__ for p in out.parts]
    assert kinds == ["TextPart", "Image", "TextPart", "Image", "TextPart", "Image", "TextPart"]
    assert out.parts[0] == TextPart("A ")
    assert out.parts[1] is img
    assert out.parts[2] == TextPart(" B look: ")
    assert out.modalities[1].data == b"\x89PNG\r\n\x1a\nxx"


def test_variables_property() -> None:
    assert lf.Template("{{a.b}} {{c[0]}} {{a}}").variables == frozenset({"a", "c"})


def test_template_requires_str() -> None:
    with pytest.raises(TypeError):
        lf.Template(3)  # type: ignore[arg-type]


_text_no_braces = st.text(alphabet=st.characters(exclude_characters="{}"), max_size=40)


@given(st.lists(st.tuples(_text_no_braces, st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True))))
def test_render_matches_plain_substitution(pieces: list[tuple[str, str]]) -> None:
    text = "".join(f"{lit}{{{{{name}}}}}" for lit, name in pieces)
    values = {name: f"<{name}>" for _, name in pieces}
    expected = "".join(f"{lit}<{name}>" for lit, name in pieces)
    assert lf.Template(text).render(values).text == expected


@given(st.text(max_size=60))
def test_parsing_arbitrary_text_never_crashes(text: str) -> None:
    try:
        t = lf.Template(text)
    except lf.TemplateError:
        return
    with contextlib.suppress(lf.TemplateError):
        t.render()
