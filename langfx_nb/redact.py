"""Credential-shaped text masked: ``redact_secrets`` for text that may quote a secret.

It masks what *looks like* a credential, with no list of the secrets themselves: well-known
key shapes (``sk-…``, ``AIza…``, ``ghp_…``, ``xoxb-…``, ``AKIA…``) whole; a token after
``Bearer `` or ``Basic ``; and the value after a credential word (``api_key``, ``token``,
``secret``, ``password``, ``passwd``, ``authorization``, also inside longer names such as
``access_token`` or ``x-api-key``) and ``:`` or ``=``. Each is replaced by ``<redacted>``;
the word, the ``:``/``=``, quotes and ``Bearer ``/``Basic `` stay, so the reader still sees what was
there. A value ends at white space, a quote, ``,``, ``;``, ``&`` or ``}`` (the delimiters
of JSON, dict reprs, query strings and header lists). A bare "bearer" or "basic" counts
only before 12 or more token characters, so prose such as "a bearer of good news" is left
alone. In a URL (``postgres://user:password@host``) the password of its userinfo is masked
and the user and host stay: it runs to the URL's last ``@`` before white space, ``"``,
``/``, ``?`` or ``#`` (where a URL's authority ends), so a password holding ``@`` is masked
whole.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "URL_SCHEME", "redact_secrets"]

REDACTED = "<redacted>"

#: A URL's scheme and ``://`` (RFC 3986), as a regular expression (at most 32 characters
#: before ``://``: a scheme is short, and a bound keeps a search linear in the text).
URL_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]{0,31}://"

_SECRETS = re.compile(
    r"(?i:\bsk-)[A-Za-z0-9_-]{6,}"  # "sk-..." API keys (several providers' prefix)
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    # "Bearer " or "Basic " and a token (RFC 6750's token68 characters)
    r"|(?i:(\b(?:bearer|basic)\s+))[A-Za-z0-9._~+/-]{12,}=*"
    # a credential word set to a value: api_key=…, "token": "…", Authorization: Bearer …
    r"|(?i:((?:api[_-]?key|token|secret|passw(?:or)?d|authorization)[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic)\s+)?))[^\s\"',;&}]+"
    # the password of a URL's userinfo: scheme://user:<password>@host
    rf"|(\b{URL_SCHEME}[^\s\"/?#@:]*:)[^\s\"/?#]+(?=@)"
)


#: Text whose case-folded form holds none of these holds nothing ``_SECRETS`` matches (each of
#: its shapes starts with or contains one): tested first, since the whole pattern costs tens of
#: microseconds even on a short text that holds nothing (each batch item's stored input).
_HINT = re.compile(
    r"sk-|aiza|gh[pousr]_|xox[abprs]-|akia|bearer|basic|api[_-]?key|token|secret|passw"
    r"|authorization|://[^\s\"/?#]*@"
)


def redact_secrets(text: str) -> str:
    """``text`` with every credential-shaped substring replaced by ``<redacted>`` (see the
    module docstring for the shapes); other text is returned unchanged."""
    if _HINT.search(text.casefold()) is None:
        return text
    return _SECRETS.sub(lambda m: (m[1] or m[2] or m[3] or "") + REDACTED, text)
