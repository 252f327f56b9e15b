"""Store URL helpers shared by the networked stores: tether's own query parameters, and
passwords kept out of every message and display.

Invariant: no password a user wrote into a store URL ever reaches an error message or a log
line. It may sit in the netloc (``user:pw@host``), in a query parameter (``?password=pw``), in
a URL of a scheme we do not know, or in a libpq ``key=value`` string; :func:`redact` covers all
of them, and :func:`scrub` removes them from any text built from such a string (a driver's
error message may quote parts of it).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

#: Query / key=value parameters whose value is a secret.
_SECRET_KEYS = ("password", "sslpassword", "passfile_password")
_KEYS = "|".join(_SECRET_KEYS)
_QUERY_SECRET = re.compile(rf"(?P<key>(?:^|[?&;])(?:{_KEYS})=)(?P<value>[^&#;]*)", re.IGNORECASE)
# libpq key=value: "password=pw", "password = 'p w'", with backslash escapes inside quotes.
_KV_SECRET = re.compile(
    rf"(?P<key>\b(?:{_KEYS})\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^\s']+)", re.IGNORECASE
)
_MASK = "***"


def _netloc_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:  # e.g. a port that is not a number: no netloc we can trust
        return None


def redact(url: str) -> str:
    """The URL (or libpq ``key=value`` string) with every password replaced by ``***``."""
    text = url
    if "://" in text:
        parts = urlsplit(text)
        password = _netloc_password(text)
        if password is not None:
            userinfo, _, hostport = parts.netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            text = urlunsplit(parts._replace(netloc=f"{user}:{_MASK}@{hostport}"))
        head, sep, query = text.partition("?")
        if sep:
            text = head + sep + _QUERY_SECRET.sub(lambda m: m.group("key") + _MASK, query)
        return text
    return _KV_SECRET.sub(lambda m: m.group("key") + _MASK, text)


def secrets_in(url: str) -> list[str]:
    """Every password written in ``url``, raw and decoded (for :func:`scrub`)."""
    found: list[str] = []
    if "://" in url:
        password = _netloc_password(url)
        if password:
            found += [password, unquote(password)]
        found += [m.group("value") for m in _QUERY_SECRET.finditer(url.partition("?")[2])]
    else:
        found += [m.group("value").strip("'") for m in _KV_SECRET.finditer(url)]
    found += [unquote_plus(value) for value in found]
    return sorted({value for value in found if value}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` with every password of ``url`` masked (driver errors may quote the DSN)."""
    for secret in secrets_in(url):
        text = text.replace(secret, _MASK)
    return text


def take_param(url: str, name: str) -> tuple[str, str | None]:
    """(the URL without query parameter ``name``, its last value or None).

    Tether's own parameters (``schema``, ``prefix``) must not reach the driver, which would
    reject or misread them. Every other parameter is kept *byte for byte*: decoding and
    re-encoding would turn ``%20`` into ``+``, which libpq does not read as a space
    (``options=-c%20statement_timeout%3D5000`` must reach it intact).
    """
    parts = urlsplit(url)
    kept: list[str] = []
    value: str | None = None
    for piece in parts.query.split("&") if parts.query else []:
        key, _, raw = piece.partition("=")
        if unquote_plus(key) == name:
            value = unquote_plus(raw)
        else:
            kept.append(piece)
    return urlunsplit(parts._replace(query="&".join(kept))), value
