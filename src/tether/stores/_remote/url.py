"""``tether://`` and ``tethers://`` URLs: where the tether servers are and which token to
show them.

``tether://TOKEN@HOST:PORT[,HOST:PORT...]`` (plain) and
``tethers://TOKEN@HOST:PORT[,...][?ca=FILE]`` (TLS; without ``ca`` the system's roots verify
the server); ``?deadline=S`` (how long a call waits for an answer) is the store's, taken out
before this parse (:mod:`tether.stores._deadline`). The token is the whole user info,
percent-decoded (a token holding ``@ : / ? #`` or ``%`` is written percent-encoded); without
one, ``$TETHER_TOKEN`` gives it (so the URL itself holds no secret). Several hosts are
tried in order on failover.

Invariant: no error raised here quotes the token: every message shows the URL through
:func:`tether.stores._urls.redact`, which masks the whole user info of these schemes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from tether._errors import ConfigError
from tether.stores._urls import redact

#: ``RemoteURL.timeout`` (REMOTE.md's interface); the calls' deadline is the store's
#: ``?deadline=`` instead, so this is always the default.
DEFAULT_TIMEOUT = 30.0
#: The environment variable that gives the token when the URL holds none.
TOKEN_ENV = "TETHER_TOKEN"
_SCHEMES = {"tether": False, "tethers": True}
_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9\-._]+)):(?P<port>\d+)$")
_TOKEN = re.compile(r"^[\x21-\x7e]+$")  # what a gRPC header value may hold


@dataclass(frozen=True)
class RemoteURL:
    """A parsed ``tether://`` / ``tethers://`` URL."""

    token: str | None = field(repr=False)  # never in a repr
    hosts: tuple[tuple[str, int], ...]
    tls: bool
    ca_file: str | None
    timeout: float = DEFAULT_TIMEOUT

    @property
    def targets(self) -> list[str]:
        """``host:port`` strings, as grpc takes them (IPv6 in brackets)."""
        return [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts]

    @classmethod
    def parse(cls, url: str) -> RemoteURL:
        shown = redact(url)
        scheme, sep, rest = url.partition("://")
        tls = _SCHEMES.get(scheme.lower()) if sep else None
        if tls is None:
            raise ConfigError(f"{shown!r} is not a tether server URL (tether://TOKEN@HOST:PORT "
                              "or tethers://TOKEN@HOST:PORT)")
        rest, _, fragment = rest.partition("#")
        if fragment:
            raise ConfigError(f"{shown!r}: a tether server URL has no #fragment")
        rest, _, query = rest.partition("?")
        netloc, slash, path = rest.partition("/")
        if path:
            raise ConfigError(f"{shown!r}: a tether server URL has no path (the server serves "
                              "one store); remove the /...")
        del slash
        userinfo, at, hostlist = netloc.rpartition("@")
        token = _token(unquote(userinfo) if at else "", shown)
        hosts = tuple(_host(part, shown) for part in hostlist.split(","))
        ca_file, timeout = _query(query, tls, shown)
        return cls(token=token, hosts=hosts, tls=tls, ca_file=ca_file, timeout=timeout)


def _token(given: str, shown: str) -> str | None:
    token = given or os.environ.get(TOKEN_ENV) or None
    if token is not None and not _TOKEN.match(token):
        source = "the URL's token" if given else f"${TOKEN_ENV}"
        raise ConfigError(f"{shown!r}: {source} holds characters that cannot travel in a gRPC "
                          "header (printable ASCII only, no spaces)")
    return token


def _host(part: str, shown: str) -> tuple[str, int]:
    found = _HOST.match(part.strip())
    if found is None:
        if not part.strip():
            raise ConfigError(f"{shown!r}: a host is missing (tether://TOKEN@HOST:PORT; "
                              "several hosts are comma-separated)")
        raise ConfigError(f"{shown!r}: {part.strip()[:80]!r} is not HOST:PORT (a port is "
                          "required; IPv6 as [::1]:PORT)")
    port = int(found["port"])
    if not 0 < port < 65536:
        raise ConfigError(f"{shown!r}: port {port} is not between 1 and 65535")
    return found["v6"] or found["name"], port


def _query(query: str, tls: bool, shown: str) -> tuple[str | None, float]:
    ca_file: str | None = None
    for piece in query.split("&") if query else []:
        key, _, raw = piece.partition("=")
        value = unquote(raw)
        if key == "ca":
            if not tls:
                raise ConfigError(f"{shown!r}: ?ca= needs TLS: use tethers://")
            if not value:
                raise ConfigError(f"{shown!r}: ?ca= needs a file (the CA certificate, PEM)")
            try:
                with open(value, "rb"):
                    pass
            except OSError as exc:
                raise ConfigError(f"{shown!r}: cannot read the CA file {value}: "
                                  f"{exc.strerror or exc}") from None
            ca_file = value
        elif key == "timeout":
            # The per-call deadline is ``?deadline=``, as for every network store (the store
            # takes it out before this parse); a ``timeout`` would be silently ignored.
            raise ConfigError(f"{shown!r}: use ?deadline=SECONDS for how long a call waits "
                              "for the server (default 5), not ?timeout=")
        else:
            raise ConfigError(f"{shown!r}: unknown option {key[:40]!r} (tether server URLs "
                              "take ca= and deadline=)")
    return ca_file, DEFAULT_TIMEOUT


__all__ = ["DEFAULT_TIMEOUT", "TOKEN_ENV", "RemoteURL"]
