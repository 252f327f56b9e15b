"""Tokens and roles of ``tether server`` (minimal version; SHELL's replaces it at merge).

Invariant: a token never reaches a log line or an error message; only its fingerprint
(:func:`fingerprint`) does. Comparing a presented token runs ``hmac.compare_digest`` over
every known token, so the time taken says nothing about which one nearly matched.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from enum import StrEnum
from pathlib import Path

from tether._errors import AuthError, ConfigError
from tether._wire import roles

__all__ = ["Authorizer", "Role", "Tokens", "fingerprint"]


class Role(StrEnum):
    WORKER = "worker"
    ADMIN = "admin"


def fingerprint(token: str) -> str:
    """What logs and errors show of a token."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:8]


class Tokens:
    """An immutable snapshot of a token file: one ``TOKEN ROLE`` per line."""

    def __init__(self, entries: tuple[tuple[str, Role], ...]) -> None:
        self._entries = entries

    @classmethod
    def load(cls, path: str) -> Tokens:
        entries: list[tuple[str, Role]] = []
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from exc
        for number, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if len(parts) != 2 or parts[1] not in ("worker", "admin"):
                raise ConfigError(f"{path}, line {number}: expected 'TOKEN worker|admin'")
            entries.append((parts[0], Role(parts[1])))
        return cls(tuple(entries))

    def role_of(self, token: str | None) -> Role | None:
        if token is None:
            return None
        found: Role | None = None
        presented = token.encode("utf-8", "surrogatepass")
        for known, role in self._entries:
            if hmac.compare_digest(presented, known.encode("utf-8")):
                found = role
        return found


class Authorizer:
    """What the service calls on every RPC. ``None`` tokens: --insecure, every call admin."""

    def __init__(self, tokens: Tokens | None) -> None:
        self._tokens = tokens
        self._lock = threading.Lock()

    def reload(self, tokens: Tokens) -> None:
        with self._lock:
            self._tokens = tokens

    def check(self, token: str | None, method: str) -> Role:
        tokens = self._tokens
        if tokens is None:
            return Role.ADMIN
        role = tokens.role_of(token)
        if role is None:
            if token is None:
                raise AuthError("refused the call: no token (give one in the URL, "
                                "tether://TOKEN@HOST:PORT, or $TETHER_TOKEN)",
                                code="unauthenticated")
            raise AuthError(f"refused token {fingerprint(token)}: unknown token",
                            code="unauthenticated")
        allowed = roles.ADMIN if role is Role.ADMIN else roles.WORKER
        if method not in allowed:
            raise AuthError(f"refused token {fingerprint(token or '')}: a {role.value} token "
                            f"may not call {method}", code="permission_denied")
        return role
