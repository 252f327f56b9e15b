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

#: Query / key=value parameters whose value is a secret (and their common spellings).
_KEYS = r"(?:ssl_?)?(?:password|passwd|pwd)|passfile_password"
_QUERY_SECRET = re.compile(rf"(?P<key>(?:^|[?&;])(?:{_KEYS})=)(?P<value>[^&#;]*)", re.IGNORECASE)
# libpq key=value: "password=pw", "password = 'p w'", with backslash escapes inside quotes.
_KV_SECRET = re.compile(
    rf"(?P<key>\b(?:{_KEYS})\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^\s']+)", re.IGNORECASE
)
_MASK = "***"


def _netloc_span(url: str) -> tuple[int, int] | None:
    """Where the netloc of ``scheme://netloc/...`` sits, found by hand: URLs that
    ``urlsplit`` refuses (a port that is not a number) are exactly the ones that end up in
    error messages."""
    start = url.find("://")
    if start < 0:
        return None
    start += 3
    end = len(url)
    for sep in "/?#":
        found = url.find(sep, start)
        if found >= 0:
            end = min(end, found)
    return start, end


def _netloc_password(url: str) -> str | None:
    span = _netloc_span(url)
    if span is None:
        return None
    userinfo, at, _ = url[span[0]:span[1]].rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1]


def redact(url: str) -> str:
    """The URL (or libpq ``key=value`` string) with every password replaced by ``***``."""
    span = _netloc_span(url)
    if span is None:
        return _KV_SECRET.sub(lambda m: m.group("key") + _MASK, url)
    start, end = span
    userinfo, at, hostport = url[start:end].rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        url = f"{url[:start]}{user}:{_MASK}@{hostport}{url[end:]}"
    head, sep, query = url.partition("?")
    if sep:
        url = head + sep + _QUERY_SECRET.sub(lambda m: m.group("key") + _MASK, query)
    return url


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
