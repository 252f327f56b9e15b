"""``tether://`` and ``tethers://`` URLs (minimal version; SHELL's replaces it at merge).

``tether://TOKEN@HOST:PORT[,HOST:PORT...]?timeout=30``; ``tethers://...?ca=FILE`` for TLS.
The token is the URL's user info (percent-decoded), else ``$TETHER_TOKEN``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

from tether._errors import ConfigError

__all__ = ["RemoteURL"]

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class RemoteURL:
    token: str | None
    hosts: tuple[tuple[str, int], ...]
    tls: bool
    ca_file: str | None
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def parse(cls, url: str) -> RemoteURL:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in ("tether", "tethers"):
            raise ConfigError("a tether server URL starts with tether:// or tethers://")
        rest, _, query = rest.partition("?")
        rest = rest.rstrip("/")
        userinfo, at, netloc = rest.rpartition("@")
        token = unquote(userinfo) if at and userinfo else os.environ.get("TETHER_TOKEN")
        hosts: list[tuple[str, int]] = []
        for item in netloc.split(","):
            host, colon, port = item.rpartition(":")
            if not colon or not port.isdigit() or not host:
                raise ConfigError("a tether server URL names HOST:PORT (comma-separated for "
                                  "several servers)")
            hosts.append((host.strip("[]"), int(port)))
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        try:
            timeout = float(params.get("timeout", DEFAULT_TIMEOUT))
        except ValueError as exc:
            raise ConfigError("?timeout= takes seconds") from exc
        if not timeout > 0:
            raise ConfigError("?timeout= takes a positive number of seconds")
        return cls(token or None, tuple(hosts), scheme.lower() == "tethers",
                   params.get("ca"), timeout)
