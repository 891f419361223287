"""redact_secrets: every credential shape is masked, its label stays, other text is kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langfx_nb.redact import REDACTED, redact_secrets

AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
GOOGLE_KEY = "AIza" + "SyD-abcdefghijklmnopqrstuvwxyz012"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # key shapes, masked whole
        ("key sk-proj-abcdefghijklmnop1234 end", "key <redacted> end"),
        ("sk-proj-SECRET3abc", "<redacted>"),
        ("SK-abcdef", "<redacted>"),  # six characters, either case
        (f"google {GOOGLE_KEY}", "google <redacted>"),
        (f"github={GITHUB_TOKEN}", "github=<redacted>"),
        ("slack xoxb-1234567890-abcdefghij", "slack <redacted>"),
        (f"aws {AWS_ID} ok", "aws <redacted> ok"),
        # a bearer token
        ("Bearer abc.def-ghi_jklmnop", "Bearer <redacted>"),
        ("bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbg== rest", "bearer <redacted> rest"),
        ("Authorization: Bearer abc.def-ghi_jklmnop", "Authorization: Bearer <redacted>"),
        # HTTP basic credentials (base64 of user:password)
        ("Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: Basic <redacted>"),
        ("sent basic dXNlcjpodW50ZXIy then", "sent basic <redacted> then"),
        # the value after a credential word and ":" or "="
        ("api_key=abc123", "api_key=<redacted>"),
        ("API-KEY: abc123", "API-KEY: <redacted>"),
        ("apikey=x", "apikey=<redacted>"),
        ('{"api_key": "s3cr3t-value"}', '{"api_key": "<redacted>"}'),
        ("'x-api-key': 'other-SECRET-1'", "'x-api-key': '<redacted>'"),
        ("token=SECRET-2 next", "token=<redacted> next"),
        ("access_token=abcdef", "access_token=<redacted>"),
        ("client_secret: 'xyz'", "client_secret: '<redacted>'"),
        ('{"password": "hunter2"}', '{"password": "<redacted>"}'),
        ("passwd = hunter22", "passwd = <redacted>"),
        ("'authorization': 'Bearer abc'", "'authorization': 'Bearer <redacted>'"),
        # a value ends at white space, a quote, "," ";" "&" or "}"
        ("password=hunter22&user=x", "password=<redacted>&user=x"),
        ("{token: abc}, next", "{token: <redacted>}, next"),
        ("secret=abc;path=/", "secret=<redacted>;path=/"),
        # the password of a URL's userinfo: the user and host stay
        (
            "cannot reach postgres://alice:hunter2-Xq9@db.example.com:5432/prod",
            "cannot reach postgres://alice:<redacted>@db.example.com:5432/prod",
        ),
        ("redis://:pw-1234@cache:6379/0", "redis://:<redacted>@cache:6379/0"),
        ("jdbc:mysql://u:p@ss@h/db", "jdbc:mysql://u:<redacted>@h/db"),  # up to the last @
        ("{'dsn': 'amqp://u:pw@q', 'to': 'a@b'}", "{'dsn': 'amqp://u:<redacted>@q', 'to': 'a@b'}"),
        (
            '{"url":"https://u:pw@h?x=1","m":"c@d"}',
            '{"url":"https://u:<redacted>@h?x=1","m":"c@d"}',
        ),
    ],
)
def test_each_credential_shape_is_masked_and_its_label_kept(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "a bearer of good news; the secret of tea",
        "Bearer short",  # a bare "bearer" needs a token of 12 or more characters
        "basic arithmetic",
        "max_tokens: 512, tokenizer=bpe",  # a credential word must be followed by : or =
        "sk-abc and AKIA123",  # too short for a key shape
        "task-1234567 asks-abcdefgh",  # "sk-" only at the start of a word
        "ssh://git@github.com/x and http://host:8080/p by a@b.org",  # no password in a URL
        "",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact_secrets(text) == text


# Text around a secret: no ASCII letters, so it cannot form a credential word or key shape.
AROUND = st.text(alphabet=" \n\t!?#()[]äöüé日本€0123456789", max_size=20)
VALUE = st.from_regex(r"[A-Za-z0-9._~+/!@#$%^*()\[\]|-]{1,30}", fullmatch=True)
LABELS = st.sampled_from(
    [
        "api_key=",
        "API-Key: ",
        '"password": "',
        "token=",
        "Authorization: Bearer ",
        "passwd:",
        "access_token = ",
        "client_secret='",
        "x-api-key:",
    ]
)
SHAPES = st.one_of(
    st.tuples(st.just(""), st.from_regex(r"[sS][kK]-[A-Za-z0-9_-]{6,40}", fullmatch=True)),
    st.tuples(st.just(""), st.from_regex(r"AIza[0-9A-Za-z_-]{30,40}", fullmatch=True)),
    st.tuples(st.just(""), st.from_regex(r"gh[pousr]_[A-Za-z0-9]{30,40}", fullmatch=True)),
    st.tuples(st.just(""), st.from_regex(r"xox[abprs]-[A-Za-z0-9-]{10,40}", fullmatch=True)),
    st.tuples(st.just(""), st.from_regex(r"AKIA[0-9A-Z]{16}", fullmatch=True)),
    st.tuples(
        st.from_regex(r"[bB][eE][aA][rR][eE][rR] {1,2}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9._~+/-]{12,40}=*", fullmatch=True),
    ),
    st.tuples(LABELS, VALUE),
)


@given(before=AROUND, shape=SHAPES, after=AROUND)
def test_a_secret_anywhere_is_masked_and_nothing_else_changes(
    before: str, shape: tuple[str, str], after: str
) -> None:
    label, secret = shape
    text = f"{before} {label}{secret} {after}"
    assert redact_secrets(text) == f"{before} {label}{REDACTED} {after}"


FRAGMENTS = st.sampled_from(
    "bearer |api_key|token|password|passwd|Authorization|:|=| |\"|'|,|;|&|}|{|sk-|AKIA|AIza"
    f"|ghp_|abcdef|0123456789|://|@|/|{REDACTED}".split("|")
)


@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=4)), max_size=12).map("".join))
def test_masking_twice_is_masking_once(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once
