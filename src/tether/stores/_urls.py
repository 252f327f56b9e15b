"""Store URL helpers shared by the networked stores: tether's own query parameters, and
passwords kept out of every message and display.

Invariant: no password a user wrote into a store URL ever reaches an error message or a log
line. It may sit in the netloc (``user:pw@host``), in a query parameter (``?password=pw``), in
a URL of a scheme we do not know, or in a libpq ``key=value`` string; in a ``tether://`` or
``tethers://`` URL the whole user info is the secret (``tether://TOKEN@host:port``).
:func:`redact` covers all of them, and :func:`scrub` removes them from any text built from
such a string (a driver's error message may quote parts of it).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

#: Query / key=value parameters whose value is a secret (and their common spellings).
_KEYS = r"(?:ssl_?)?(?:password|passwd|pwd)|passfile_password"
_QUERY_SECRET = re.compile(rf"(?P<key>(?:^|[?&;])(?:{_KEYS})=)(?P<value>[^&#;]*)", re.IGNORECASE)
# libpq key=value: "password=pw", "password = 'p w'", with backslash escapes inside quotes.
_KV_SECRET = re.compile(
    rf"(?P<key>\b(?:{_KEYS})\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^\s']+)", re.IGNORECASE
)
_MASK = "***"
#: Schemes whose whole user info is a secret (a ``tether server`` token, no user name).
_TOKEN_SCHEMES = ("tether://", "tethers://")


def _token_scheme(url: str) -> bool:
    return url[:10].lower().startswith(_TOKEN_SCHEMES)


#: What to tell a user whose URL did not parse cleanly: almost always a password holding a
#: character that has a meaning in a URL.
ENCODE_HINT = ("if the user name or password holds special characters (@ : / ? # [ ] % or a "
               "space), percent-encode them (@ as %40, : as %3A, / as %2F, ? as %3F, # as %23, "
               "% as %25, a space as %20; urllib.parse.quote(password, safe=''))")
#: What a clean user info may hold (RFC 3986: unreserved, sub-delims, ':' and %XX escapes).
_USERINFO = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*$")
# A clean host list: names, IPv4, [IPv6], percent-encoded socket paths, ports; ',' between
# the hosts of a libpq multi-host URL.
_HOSTS = re.compile(r"^(?:(?:\[[0-9A-Fa-f:.%a-zA-Z]*\]|[A-Za-z0-9\-._~%]*)(?::[0-9]*)?,?)*$")


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


def _userinfo_end(url: str) -> tuple[int, int, bool] | None:
    """(start, end, clean) of the user info of ``scheme://userinfo@...``, None without one.

    Clean: the netloc holds exactly one '@', no '@' follows it, the user info holds only the
    characters a URL allows there and the host part is a host list. Otherwise the URL is
    ambiguous (a password with '/', '#', '?' or '@' in it cuts the URL anywhere): the user
    info is taken to run to the *last* '@', so whatever the password held is inside it."""
    span = _netloc_span(url)
    if span is None:
        return None
    start, end = span
    netloc = url[start:end]
    if "@" not in url[start:]:
        return None
    userinfo, _, hostport = netloc.rpartition("@")
    clean = (netloc.count("@") == 1 and "@" not in url[end:]
             and bool(_USERINFO.match(userinfo)) and bool(_HOSTS.match(hostport)))
    if clean:
        return start, start + len(userinfo), True
    return start, url.rindex("@"), False


def clean(url: str) -> bool:
    """False when the URL's user info did not parse cleanly (see :func:`hint`)."""
    found = _userinfo_end(url)
    return found is None or found[2]


def hint(url: str) -> str:
    """``"; " + ENCODE_HINT`` for a URL whose user info did not parse cleanly, else ``""``:
    appended to every error that shows such a URL."""
    return "" if clean(url) else f"; {ENCODE_HINT}"


def _netloc_password(url: str) -> str | None:
    found = _userinfo_end(url)
    if found is None:
        return None
    start, end, is_clean = found
    userinfo = url[start:end]
    if not is_clean or _token_scheme(url):
        return userinfo  # all of it: unclean, or a token (the whole user info is secret)
    if ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1]


def redact(url: str) -> str:
    """The URL (or libpq ``key=value`` string) with every password replaced by ``***``.

    A URL whose user info does not parse cleanly loses all of it (``scheme://***@host``):
    which part is the password cannot be told, and a fragment shown is a fragment leaked."""
    span = _netloc_span(url)
    if span is None:
        return _KV_SECRET.sub(lambda m: m.group("key") + _MASK, url)
    found = _userinfo_end(url)
    if found is not None:
        start, end, is_clean = found
        userinfo = url[start:end]
        if not is_clean or (userinfo and _token_scheme(url)):
            url = f"{url[:start]}{_MASK}{url[end:]}"
        elif ":" in userinfo:
            url = f"{url[:start]}{userinfo.split(':', 1)[0]}:{_MASK}{url[end:]}"
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
    reject or misread them. Every other byte is kept as written: decoding and re-encoding
    would turn ``%20`` into ``+``, which libpq does not read as a space
    (``options=-c%20statement_timeout%3D5000`` must reach it intact), and rebuilding the URL
    from ``urlsplit`` drops the ``//`` of an empty host (``postgresql:///db?host=/socket``
    became ``postgresql:/db?host=...``, which libpq reads as ``key=value`` pairs).
    """
    head, sep, query = url.partition("?")
    if not sep:
        return url, None
    query, hash_, fragment = query.partition("#")
    kept: list[str] = []
    value: str | None = None
    for piece in query.split("&") if query else []:
        key, _, raw = piece.partition("=")
        if unquote_plus(key) == name:
            value = unquote_plus(raw)
        elif piece:
            kept.append(piece)
    rest = "&".join(kept)
    return f"{head}{'?' if rest else ''}{rest}{hash_}{fragment}", value


def leaks(text: str, url: str) -> bool:
    """True when ``text`` quotes a password of ``url``, or, for a URL whose user info did not
    parse cleanly, any three characters in a row of that user info (a driver that split the
    URL elsewhere quotes pieces of the password as a host, port or database name)."""
    if any(secret in text for secret in secrets_in(url)):
        return True
    found = _userinfo_end(url)
    if found is None or found[2]:
        return False
    userinfo = url[found[0]:found[1]]
    return any(userinfo[i:i + 3] in text for i in range(len(userinfo) - 2))
