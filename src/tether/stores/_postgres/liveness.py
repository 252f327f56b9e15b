"""Death detection on the PostgreSQL store (the :class:`~tether.stores._contract.Liveness`
role).

Invariants:

* **A token is a session advisory lock on a dedicated connection** (one per worker process,
  never pooled, never used for anything else, so no statement timeout, pooler or idle-in-
  transaction rule can end it): the server releases it when the session ends, which is when
  the process dies (its socket closes), and not before. A paused process keeps its socket,
  so it keeps its token.
* **The row comes after the lock**: ``live_tokens`` says which workers took a token and under
  which key; it is written once the lock is held, so a checker never sees a token not yet
  taken. A worker without a row (an older release) is never dead.
* **One statement checks everyone** (``dead_owners`` in liveness.sql: a shared
  transaction-level probe of each live token's key, refused while its holder lives; not a
  read of pg_locks, which stalls the whole lock manager).
* **A cut token connection is re-taken at once**: a watcher thread waits on the socket (no
  query, no load) and, when the server closes it while the process lives, takes a new lock
  under a new key. Between the cut and the re-take the worker looks dead: that is the
  false-death case docs/guarantees.md tells (its jobs run again, fenced).
* Behind a transaction pooler, session state does not survive a transaction: the token
  connection goes to ``direct=`` when the URL gives it; without it this store object cannot
  detect death (``capabilities.liveness_why_not``) and the lease alone decides.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import psycopg

from tether.stores._contract import REAPED_ERROR, DeadOwners, JobStatus, Leadership, Reaped
from tether.stores._postgres.connection import Conn
from tether.stores._postgres.driver_errors import mapped
from tether.stores._postgres.plumbing import Plumbing
from tether.stores._token_watch import WATCH_EVERY, HeldToken

log = logging.getLogger("tether.store.postgres")

#: Why a pooled URL without ``direct=`` cannot hold a token (``liveness_why_not``).
POOLED = ("behind a transaction pooler (pooler=transaction) without a direct= session "
          "connection, a session advisory lock cannot be held")


def _new_key() -> int:
    return secrets.randbits(64) - (1 << 63)  # a signed bigint


class SessionToken(HeldToken):
    """One held token: its dedicated connection, its key, the watcher that re-takes it."""

    def __init__(self, worker_id: str, connect: Callable[[], Conn],
                 queries: dict[str, str]) -> None:
        self._connect = connect
        self._queries = queries
        self.key = 0
        super().__init__(worker_id)

    def _take(self) -> Conn:
        conn = self._connect()
        try:
            # An operator's idle_session_timeout (PostgreSQL >= 14) would end this quiet
            # session: a false death every time. Turned off for this session only; an older
            # server does not know the setting, which is fine.
            try:
                conn.execute("SET idle_session_timeout = 0")
            except psycopg.Error:
                pass
            while True:
                key = _new_key()
                row = conn.execute(self._queries["live_token_lock"], {"key": key}).fetchone()
                if row is not None and row[0]:
                    break  # (a random 64-bit key held by someone else: draw another)
            conn.execute(self._queries["live_token_put"], {"worker": self.worker_id, "key": key})
        except BaseException:
            with contextlib.suppress(Exception):
                conn.close()
            raise
        self.key = key
        return conn

    def _quiet(self) -> None:
        ready, _, _ = select.select([self.conn.fileno()], [], [], WATCH_EVERY)
        if ready and not self._stop.is_set():
            self.conn.execute("SELECT 1")  # a notice or a parameter change: still fine

    def _give_up(self) -> None:
        self.conn.execute(self._queries["live_token_unlock"], {"key": self.key})

    def _drop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()  # ending the session releases the lock in any case


#: Tokens this process holds: (session conninfo, schema, worker id) -> token. Several store
#: objects of one URL (a worker opens three) share the one token.
_tokens: dict[tuple[str, str, str], SessionToken] = {}
_tokens_lock = threading.Lock()


class PostgresLiveness(Plumbing):
    """The :class:`~tether.stores._contract.Liveness` role of :class:`PostgresStore`."""

    capabilities: Any

    def _token_id(self, worker_id: str) -> tuple[str, str, str]:
        pooler = self._connector.pooler
        session = pooler.direct if pooler.transaction and pooler.direct else self._connector.dsn
        return (session or "", self.schema, worker_id)

    def take_liveness(self, worker_id: str) -> bool:
        if not self.capabilities.detects_death:
            return False
        ident = self._token_id(worker_id)
        with _tokens_lock:
            if ident in _tokens:
                return True
            with mapped():
                _tokens[ident] = SessionToken(
                    worker_id, lambda: self._connector.connect(listener=True), self.queries)
        return True

    def release_liveness(self, worker_id: str) -> None:
        with _tokens_lock:
            token = _tokens.pop(self._token_id(worker_id), None)
        if token is not None:
            token.release()

    def dead_owners(self, elections: Sequence[str] = ()) -> DeadOwners:
        if not self.capabilities.detects_death:
            return DeadOwners()
        workers: list[str] = []
        leaders: list[Leadership] = []
        for kind, name, holder, term, expires in self._rows(
                "dead_owners", {"elections": list(elections)}):
            if kind == "worker":
                workers.append(str(name))
            else:
                leaders.append(Leadership(str(name), str(holder), int(term), float(expires)))
        return DeadOwners(tuple(sorted(workers)), tuple(leaders))

    def dead_workers(self, worker_ids: Sequence[str]) -> frozenset[str]:
        if not self.capabilities.detects_death or not worker_ids:
            return frozenset()
        return frozenset(str(r[0]) for r in self._rows("dead_workers",
                                                       {"workers": list(worker_ids)}))

    def reap_dead(
        self, owners: Sequence[str], *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0 or not owners or not self.capabilities.detects_death:
            return []
        params = {"owners": list(owners), "now": now, "limit": limit, "error": REAPED_ERROR,
                  "channel": self.channel, "done": self.done_channel}
        return sorted((Reaped(int(i), int(a), str(o), cast(JobStatus, s), int(n))
                       for i, a, o, s, n in self._rows("reap_dead", params)),
                      key=lambda r: r.job_id)

    def forget_tokens(self, older_than: float) -> None:
        """Delete reaped tokens of workers whose rows are gone (``delete_dead_workers``)."""
        if self.capabilities.detects_death:
            with self._connector.connection() as used:
                used.execute(self.queries["forget_tokens"], {"older_than": float(older_than)})


__all__ = ["POOLED", "PostgresLiveness", "SessionToken"]
