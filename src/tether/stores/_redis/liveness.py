"""Death detection on the Redis store (the :class:`~tether.stores._contract.Liveness` role).

Invariants:

* **A token is a dedicated connection** (one per worker process, never pooled, never used for
  a command after it is taken): the server drops it when the process dies (the kernel closes
  its socket), and not before; a paused process keeps its socket, so it keeps its token. It
  is named ``tether-live-<id>`` (CLIENT SETNAME) so ``CLIENT LIST`` shows what it is.
* ``P:live`` (hash) says which workers took one: worker id -> ``"<run_id> <client id>"``, or
  ``reaped`` once it was found dead and every job it held was taken back (the sub-second
  check stops probing it; a dead leader holder is still matched through it). A worker
  without an entry (an older release) is never dead.
* **A check is one read and one CLIENT LIST**: the token records (pipelined with the asked
  leases), then ``CLIENT LIST ID ...`` of the recorded client ids; an id missing there is a
  closed connection. Only then is the server's run id read (``INFO server``): a record from
  an earlier server run is not judged (a restart closes every connection, and a live worker
  takes its token again at once): the lease decides until it has, so a restart never makes
  every running job look orphaned.
* **A cut token connection is re-taken**: a watcher thread waits on the socket (no command)
  and takes a new connection when the server closes it while the process lives (the
  false-death case of docs/guarantees.md). With an idle ``timeout`` configured on the server,
  it PINGs often enough that the server never closes the token for being idle.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import redis

from tether.stores._contract import REAPED_ERROR, DeadOwners, JobStatus, Leadership, Reaped
from tether.stores._liveness import holder_worker
from tether.stores._redis import rows as codec
from tether.stores._redis.connection import io
from tether.stores._token_watch import WATCH_EVERY, HeldToken

log = logging.getLogger("tether.store.redis")

REAPED = "reaped"


def _command(conn: Any, *args: Any) -> Any:
    conn.send_command(*args)
    return conn.read_response()


class ConnectionToken(HeldToken):
    """One held token: its dedicated connection and the watcher that re-takes it."""

    def __init__(self, client: redis.Redis, key: str, worker_id: str) -> None:
        self._client = client
        self._key = key
        self._ping_every: float | None = None
        super().__init__(worker_id)

    def _take(self) -> Any:
        # A raw connection of the client's pool settings (redis-py's are untyped): Any.
        conn: Any = self._client.connection_pool.make_connection()
        try:
            conn.connect()
            cid = int(_command(conn, "CLIENT", "ID"))
            _command(conn, "CLIENT", "SETNAME", f"tether-live-{cid}")
            info = str(_command(conn, "INFO", "server"))
            run_id = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                           if line.startswith("run_id:")), "")
            try:  # an idle-client timeout would close the token: ping well within it
                reply = _command(conn, "CONFIG", "GET", "timeout")
                idle = float(reply[1]) if len(reply) > 1 else 0.0
                self._ping_every = idle / 3 if idle > 0 else None
            except redis.ResponseError:  # CONFIG renamed or refused: assume no timeout
                self._ping_every = None
            # Recorded after the connection exists, so a check never sees a token not taken.
            _command(conn, "HSET", self._key, self.worker_id, f"{run_id} {cid}")
        except BaseException:
            with contextlib.suppress(Exception):
                conn.disconnect()
            raise
        return conn

    def _quiet(self) -> None:
        if self.conn.can_read(timeout=min(WATCH_EVERY, self._ping_every or WATCH_EVERY)):
            self.conn.read_response()  # raises once the server closed it
        elif self._ping_every is not None:
            _command(self.conn, "PING")

    def _drop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.disconnect()


#: Tokens this process holds: (P:live key, worker id) -> token.
_tokens: dict[tuple[str, str], ConnectionToken] = {}
_tokens_lock = threading.Lock()


class RedisLiveness:
    """The :class:`~tether.stores._contract.Liveness` role of :class:`RedisStore`."""

    _client: redis.Redis

    if TYPE_CHECKING:
        def _run(self, name: str, *args: Any) -> Any: ...

        def _key(self, *parts: str) -> str: ...

    def take_liveness(self, worker_id: str) -> bool:
        ident = (self._key("live"), worker_id)
        with _tokens_lock:
            if ident not in _tokens:
                with io():
                    _tokens[ident] = ConnectionToken(self._client, ident[0], worker_id)
        return True

    def release_liveness(self, worker_id: str) -> None:
        with _tokens_lock:
            token = _tokens.pop((self._key("live"), worker_id), None)
        if token is not None:
            token.release()

    def _judge(self, elections: Sequence[str]) -> tuple[dict[str, str], set[str],
                                                        list[Leadership]]:
        """(token records, the dead among them, the asked current leases)."""
        with io():
            pipe = self._client.pipeline(transaction=False)
            pipe.hgetall(self._key("live"))
            for name in elections:
                pipe.hmget(self._key("leader", name), "holder", "term", "expires_at")
            replies = pipe.execute()
            records: dict[str, str] = replies[0]
            dead = {w for w, v in records.items() if v == REAPED}
            judged: dict[str, tuple[str, int]] = {}  # worker -> (server run, client id)
            for worker, value in records.items():
                run, _, cid = value.partition(" ")
                if value != REAPED and cid.isdigit():
                    judged[worker] = (run, int(cid))
            if judged:
                ids = sorted({cid for _, cid in judged.values()})
                # Raw (redis-py's parse of every field of every line cost ten times more):
                # a line per live client, "id=<n> addr=...".
                raw: Any = self._client  # redis-py's execute_command is untyped
                listed = str(raw.execute_command("CLIENT", "LIST", "ID", *ids))
                alive = {int(line[3:].split(" ", 1)[0]) for line in listed.splitlines()
                         if line.startswith("id=")}
                missing = {w: run for w, (run, cid) in judged.items() if cid not in alive}
                if missing:  # only then: which server run are we on (INFO costs a parse)
                    run_id = str(self._client.info("server").get("run_id", ""))
                    dead.update(w for w, run in missing.items() if run == run_id)
        leaders = [Leadership(name, str(row[0]), int(row[1]), float(row[2]))
                   for name, row in zip(elections, replies[1:], strict=True)
                   if row[0] is not None]
        return records, dead, leaders

    def dead_owners(self, elections: Sequence[str] = ()) -> DeadOwners:
        records, dead, leaders = self._judge(elections)
        workers = tuple(sorted(w for w in dead if records.get(w) != REAPED))
        return DeadOwners(workers, tuple(lead for lead in leaders
                                         if holder_worker(lead.holder) in dead))

    def dead_workers(self, worker_ids: Sequence[str]) -> frozenset[str]:
        _, dead, _ = self._judge(())
        return frozenset(w for w in worker_ids if w in dead)

    def reap_dead(
        self, owners: Sequence[str], *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0 or not owners:
            return []
        rows = self._run("reap", codec.now_arg(now), "0",
                         str(int(limit)), REAPED_ERROR, json.dumps(list(owners)))
        return [Reaped(int(r[0]), int(r[1]), str(r[2]), cast(JobStatus, r[3]), int(r[4]))
                for r in rows]


__all__ = ["ConnectionToken", "RedisLiveness"]
