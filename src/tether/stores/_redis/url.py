"""Redis URLs: checked whole before anything connects, so a typo is one clear error at start-up.

redis-py is lenient in ways that hide mistakes: ``redis://host/abc`` silently uses db 0, an
unknown query parameter only fails at the first command (as a raw ``TypeError`` deep in a
connection pool), and an empty ``?prefix=`` used to fall back to the default prefix (another
app's data). Here every part is checked and each mistake is one :class:`ConfigError` naming the
field. Error messages show the URL through :func:`tether.stores._urls.redact`: no password,
whether it sits in the netloc or in ``?password=``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from tether._errors import ConfigError
from tether.stores._deadline import take_deadline
from tether.stores._urls import clean, hint, redact, take_param

DEFAULT_PREFIX = "tether"
MAX_PREFIX = 200
#: Characters a prefix may not hold: whitespace breaks nothing in Redis but everything in a
#: shell; glob characters would make ``SCAN MATCH prefix:*`` (operators' clean-up) match
#: other apps' keys.
_BAD_PREFIX = frozenset("*?[]\\") | frozenset(chr(c) for c in range(33)) | {"\x7f"}


def _number(cast: Callable[[str], float], low: float, high: float) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            value = cast(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):
            kind = "an integer" if cast is int else "a number"
            raise ValueError(f"must be {kind} from {low:g} to {high:g}")
        return value

    return parse


def _boolean(text: str) -> object:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _choice(*allowed: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


def _text(text: str) -> object:
    return text


_DB = _number(int, 0, 2**31 - 1)
#: The query parameters tether passes on to redis-py, each with its check. Anything else is
#: refused (redis-py would fail on it at the first command, or worse, ignore it).
PARAMS: dict[str, Callable[[str], object]] = {
    "db": _DB,
    "socket_timeout": _number(float, 0.001, 86_400),
    "socket_connect_timeout": _number(float, 0.001, 86_400),
    "socket_keepalive": _boolean,
    "retry_on_timeout": _boolean,
    "max_connections": _number(int, 1, 1_000_000),
    "health_check_interval": _number(int, 0, 86_400),
    "client_name": _text,
    "username": _text,
    "password": _text,
    "protocol": _choice("2"),
    "ssl_cert_reqs": _choice("none", "optional", "required"),
    "ssl_check_hostname": _boolean,
    "ssl_ca_certs": _text,
    "ssl_ca_path": _text,
    "ssl_certfile": _text,
    "ssl_keyfile": _text,
    "ssl_password": _text,
    "ssl_ciphers": _text,
}


@dataclass(frozen=True, slots=True)
class RedisURL:
    """A checked URL: the one redis-py gets (without tether's ``prefix`` and ``deadline``),
    the prefix and the deadline (seconds, see :mod:`tether.stores._deadline`)."""

    client_url: str
    prefix: str
    shown: str  # for display and errors: no password
    deadline: float
    #: ``?allow_eviction=1``: run on a server whose maxmemory-policy may evict tether's keys
    #: (schema.py refuses to otherwise).
    allow_eviction: bool = False


def check_prefix(prefix: str, url: str = "") -> str:
    where = f" in {redact(url)!r}" if url else ""
    if not prefix:
        raise ConfigError(f"redis prefix must not be empty{where} (leave it out for "
                          f"the default {DEFAULT_PREFIX!r})")
    if len(prefix) > MAX_PREFIX:
        raise ConfigError(f"redis prefix is {len(prefix)} characters long{where}; the limit "
                          f"is {MAX_PREFIX}")
    bad = sorted({c for c in prefix if c in _BAD_PREFIX})
    if bad:
        raise ConfigError(f"redis prefix {prefix!r}{where} must not contain {bad!r} "
                          "(whitespace, control or glob characters)")
    return prefix


def parse(url: str, prefix: str | None = None, deadline: float | None = None) -> RedisURL:
    """Check a ``redis://`` / ``rediss://`` URL whole; ConfigError names the bad field.
    ``prefix`` and ``deadline`` given as options win over the URL's.

    A URL whose user info did not parse cleanly (a password that was not percent-encoded)
    that is refused gets one message without the field: the field would quote a piece of
    the password (redis-py reads such a URL as the standard says: the password ends at the
    first '/', '?' or '#')."""
    try:
        return _parse(url, prefix, deadline)
    except ConfigError:
        if clean(url):
            raise
        raise ConfigError(f"redis URL {redact(url)!r} does not parse{hint(url)}") from None


def _parse(url: str, prefix: str | None, deadline: float | None) -> RedisURL:
    shown = redact(url)
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("redis", "rediss"):
        raise ConfigError(f"not a redis URL: {shown!r}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"redis URL {shown!r}: port must be a number from 1 to 65535")
    if not parts.hostname:
        raise ConfigError(f"redis URL {shown!r}: host is missing")
    path = unquote(parts.path).strip("/")
    if path:
        try:
            _DB(path)
        except ValueError:
            raise ConfigError(
                f"redis URL {shown!r}: db (the path) must be a non-negative integer, "
                f"got {path!r}"
            ) from None
    client_url, url_prefix = take_param(url, "prefix")
    client_url, seconds = take_deadline(client_url, deadline)
    client_url, evict = take_param(client_url, "allow_eviction")
    allow_eviction = False
    if evict is not None:
        try:
            allow_eviction = bool(_boolean(evict))
        except ValueError as exc:
            raise ConfigError(f"redis URL {shown!r}: allow_eviction {exc}, got {evict!r}") \
                from None
    for name, value in parse_qsl(urlsplit(client_url).query, keep_blank_values=True):
        check = PARAMS.get(name)
        if check is None:
            raise ConfigError(
                f"redis URL {shown!r}: unknown parameter {name!r} (tether knows prefix, "
                f"allow_eviction, deadline and "
                f"{', '.join(sorted(PARAMS))})"
            )
        try:
            check(value)
        except ValueError as exc:
            raise ConfigError(f"redis URL {shown!r}: {name} {exc}, got {value!r}") from None
    chosen = prefix if prefix is not None else url_prefix
    if chosen is None:
        chosen = DEFAULT_PREFIX
    check_prefix(chosen, url)
    return RedisURL(client_url, chosen, redact(client_url), seconds, allow_eviction)
