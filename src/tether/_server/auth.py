"""Who may call what on ``tether server``: the token file, roles, and the check every call
passes.

Invariant: no token ever leaves this module in a message. Errors about the token file name
the file and the line number; errors about a caller name the token by :func:`fingerprint`
(a short hash an operator can compute from the file to tell which client it was). Token
comparison runs in constant time over every known token (``hmac.compare_digest``), so the
time a refusal takes says nothing about how close a guess came.

The token file: one ``TOKEN ROLE`` per line (role ``worker`` or ``admin``), ``#`` comments
and blank lines allowed. A malformed line, an unknown role, a token that cannot travel in a
gRPC header or a token listed twice is an error naming the line; a token shorter than
:data:`SHORT` characters is accepted with a warning (it can be guessed).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import math
import os
import re
import stat
import threading
import time
from dataclasses import dataclass

from tether._errors import AuthError, ConfigError
from tether._wire import roles

log = logging.getLogger("tether.server")

#: Tokens shorter than this are accepted with a warning: 16 random characters is about the
#: least that cannot be guessed online (``python -c "import secrets;
#: print(secrets.token_urlsafe(32))"`` makes a good one).
SHORT = 16
#: Seconds between two log lines about the same refusal.
LOG_REFUSALS_EVERY = 60.0
#: What may travel in a gRPC metadata value: printable ASCII without spaces.
_TOKEN = re.compile(r"^[\x21-\x7e]+$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class Role(enum.StrEnum):
    """A token's role: ``worker`` (what workers and producers need) or ``admin`` (all)."""

    WORKER = "worker"
    ADMIN = "admin"


def fingerprint(token: str) -> str:
    """``sha256:1a2b3c4d``: what logs and errors show instead of a token. Eight hex digits
    tell the tokens of one file apart and give nothing usable away."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:8]


@dataclass(frozen=True)
class Tokens:
    """An immutable snapshot of a token file: (token bytes, role) pairs, and where it came
    from (for the logs)."""

    entries: tuple[tuple[bytes, Role], ...]
    path: str = "<memory>"

    @classmethod
    def load(cls, path: str) -> Tokens:
        """Read and check the token file; :class:`ConfigError` naming the line on bad input."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            mode = os.stat(path).st_mode
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else \
                type(exc).__name__
            raise ConfigError(f"cannot read the token file {path}: {reason}") from None
        tokens = cls.parse(text, path)
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("the token file %s can be read by other users (mode %o): chmod 600 it",
                        path, stat.S_IMODE(mode))
        return tokens

    @classmethod
    def parse(cls, text: str, path: str = "<memory>") -> Tokens:
        """The token file's text (see the module's docstring) as a snapshot."""
        entries: list[tuple[bytes, Role]] = []
        seen: dict[bytes, int] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            comment = next((i for i, f in enumerate(fields) if f.startswith("#")), None)
            fields = fields[:comment]  # `TOKEN ROLE  # who holds it`
            where = f"{path} line {number}"
            if len(fields) != 2:
                raise ConfigError(f"{where}: expected `TOKEN ROLE` (role worker or admin), "
                                  f"found {len(fields)} field(s)")
            token, role_name = fields
            try:
                role = Role(role_name.lower())
            except ValueError:
                raise ConfigError(f"{where}: unknown role {role_name[:20]!r} (worker or "
                                  "admin)") from None
            if not _TOKEN.match(token):
                raise ConfigError(f"{where}: the token holds characters that cannot travel in "
                                  "a gRPC header (use printable ASCII)")
            key = token.encode("ascii")
            if key in seen:
                raise ConfigError(f"{where}: the same token as line {seen[key]} (each token "
                                  "has one role)")
            seen[key] = number
            if len(token) < SHORT:
                log.warning("%s: token %s is shorter than %d characters and can be guessed; "
                            "make one with `python -c \"import secrets; "
                            "print(secrets.token_urlsafe(32))\"`", where, fingerprint(token),
                            SHORT)
            entries.append((key, role))
        if not entries:
            raise ConfigError(f"the token file {path} holds no tokens (one `TOKEN ROLE` per "
                              "line)")
        return cls(tuple(entries), path)

    def role_of(self, token: str | None) -> Role | None:
        """The token's role, None for an unknown (or no) token. Compares with every token in
        constant time, so a refusal takes as long as an acceptance."""
        if not token:
            return None
        given = token.encode("utf-8", "surrogatepass")
        found: Role | None = None
        for key, role in self.entries:
            if hmac.compare_digest(given, key) and found is None:
                found = role
        return found

    def counts(self) -> dict[Role, int]:
        """Tokens per role (for the server's start line)."""
        out = dict.fromkeys(Role, 0)
        for _, role in self.entries:
            out[role] += 1
        return out

    def __repr__(self) -> str:  # never the tokens
        counts = ", ".join(f"{role.value}={n}" for role, n in self.counts().items())
        return f"Tokens({self.path!r}, {counts})"


def method_name(method: str) -> str:
    """``claim`` for ``claim``, ``Claim`` or ``/tether.v1.Store/Claim``."""
    name = method.rsplit("/", 1)[-1]
    return name if name.islower() else _CAMEL.sub("_", name).lower()


class Authorizer:
    """The check the server runs on every call. ``tokens=None`` is ``--insecure``: every
    caller is an admin. :meth:`reload` swaps the snapshot atomically (calls in flight finish
    with the one they started with)."""

    def __init__(self, tokens: Tokens | None) -> None:
        self._tokens = tokens
        self._lock = threading.Lock()
        self._said: dict[str, float] = {}  # refusal -> when it was last logged

    @property
    def tokens(self) -> Tokens | None:
        return self._tokens

    def reload(self, tokens: Tokens) -> None:
        with self._lock:
            self._tokens = tokens

    def check(self, token: str | None, method: str) -> Role:
        """The caller's role, or :class:`AuthError`: ``unauthenticated`` for a missing or
        unknown token, ``permission_denied`` for a method the role may not call. Each
        refusal is logged at WARNING, at most once a minute for the same token and method
        (a misconfigured fleet must not flood the log)."""
        tokens = self._tokens
        if tokens is None:
            return Role.ADMIN
        try:
            return self._check(tokens, token, method)
        except AuthError as exc:
            self._log(str(exc))
            raise

    def _log(self, refusal: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._said.get(refusal, -math.inf) < LOG_REFUSALS_EVERY:
                return
            if len(self._said) >= 1000:
                self._said.clear()
            self._said[refusal] = now
        log.warning("%s", refusal)

    def _check(self, tokens: Tokens, token: str | None, method: str) -> Role:
        name = method_name(method)
        role = tokens.role_of(token)
        # The messages read on after "the tether server at HOST:PORT " (the client adds it):
        # "the tether server at h:7400 refused token sha256:1a2b3c4d: unknown token".
        if role is None:
            if not token:
                raise AuthError(f"refused a call to {name} without a token (give one: "
                                "tether://TOKEN@HOST:PORT, or $TETHER_TOKEN)",
                                code="unauthenticated")
            raise AuthError(f"refused token {fingerprint(token)}: unknown token",
                            code="unauthenticated")
        allowed = roles.ADMIN if role is Role.ADMIN else roles.WORKER
        if name not in allowed:
            raise AuthError(f"refused token {fingerprint(token or '')} ({role.value}) for "
                            f"{name}: that needs an admin token", code="permission_denied")
        return role


__all__ = ["SHORT", "AuthError", "Authorizer", "Role", "Tokens", "fingerprint", "method_name"]
