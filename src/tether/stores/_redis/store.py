"""The Redis store: every multi-key step is one Lua script, run with EVALSHA.

Invariants (those of :mod:`tether.stores._contract`, kept the Redis way):

* Each state change of a job (enqueue, claim, heartbeat, finish, reap, cancel, retry_failed,
  checkpoint/progress, prune) is ONE script over a whole batch, so Redis' single-threaded
  script execution makes it atomic: no client ever sees a job half-moved between indexes, and
  two claimers can never take the same (job, attempt). Redis never rolls a script back, so
  scripts check their input before the first write (a batch is all or nothing).
* Every write about a running job is fenced inside its script (``lease.py`` says how).
* Workflow links (issue #20, invariant 6) resolve in the script that ends the parent
  (finish, reap, cancel, purge): its ``P:waiters:{id}`` set is read and deleted there, so each
  link resolves once, and a job without children (no ``waiters`` field in the hash the script
  reads anyway) costs no extra call. Enqueue checks every parent before its first write.
* Every call is safe to repeat (redis-py's retry replays a script whose reply was lost): a
  request id makes enqueue, claim, cancel and retry_failed answer a repeat from the record
  their first run wrote; finish recognises its own applied outcome by the kept token;
  heartbeat, checkpoint/progress, leader calls and worker registration are idempotent.
* The store's clock is the server's ``TIME``, read inside the script, unless the caller
  passes an explicit ``now`` (scripts receive ``''`` for "none").
* Indexes are sorted sets, so the hot paths are range reads, O(batch * log n): no KEYS/SCAN.
* At ``maxmemory`` (noeviction) a script that writes is refused whole: each asks for room
  before its first write (``room()``, ``_lib.lua``; Redis itself lets a script whose first
  write only shrinks memory run past the limit, as the claim's did), except the
  heartbeat and finish scripts, which on Redis >= 7 carry the ``allow-oom`` flag so a worker
  at the limit keeps and finishes what it holds (``calls.ALLOW_OOM``). Claims wait for room
  after any refusal (``memory.py``).
* Scripts are registered with redis-py's ``register_script``: after a server restart or
  ``SCRIPT FLUSH`` the first EVALSHA gets NOSCRIPT and redis-py reloads the script.

Key layout (``P`` is the prefix, default ``tether``, from ``?prefix=`` in the URL); nothing is
written outside ``P:``::

    P:schema_version              string   1 (SET NX by migrate)
    P:epoch                       string   random, made by migrate: gone = data lost (_watch)
    P:incidents                   hash     run_id, restarts_seen, data_loss, last_*_at,
                                           missing_jobs (hashes found gone by claim/reap)
    P:room                        zset     never exists: room() asks ZADD XX of it (_lib.lua)
    P:ids                         string   INCR counter of job ids
    P:job:{id}                    hash     every field of JobRecord (absent = None), plus
                                           lease_owner (the owner of lease_token) and, in
                                           a workflow, waiting_on, allow_failure, children,
                                           waiters (see _lib.lua)
    P:queues                      set      every queue name ever enqueued to
    P:prios:{queue}               zset     priority levels with pending jobs (score = member)
    P:pending:{queue}:{priority}  zset     pending jobs, score run_at, member id zero-padded
                                           to 16 digits (equal run_at tie-breaks by id)
    P:running                     zset     running jobs, score lease_until (the reaper range;
                                           also the slots of concurrency limits, claim_flow)
    P:flow:starts:{group}         zset     starts of a rate-limited group (FlowLimit.group),
                                           member <nonce>:<id>, score the claim's now
    P:idx:{queue}:{status}        zset     job ids by status, score id (list_jobs, counts);
                                           status waiting too: a job waiting on its parents
                                           is in no pending zset, so no claim can take it
    P:finished:{status}           zset     terminal jobs, score finished_at (prune range)
    P:parents:{id}                list     a job's ``after`` ids, distinct, in order (issue
                                           20); kept until the job itself is pruned/purged
    P:children:{id}               zset     jobs that named {id} in ``after``, score their id;
                                           a child leaves it when pruned/purged
    P:waiters:{id}                set      children whose link to {id} is unresolved; the
                                           script that ends {id} reads and deletes it whole
    P:unique                      hash     unique_key -> id of its live (non-terminal) job
    P:req:{call}:{request id}     string   a call's reply, for its replays (expires: PX)
    P:workers                     hash     worker id -> JSON {host, pid, queues, concurrency,
                                           started_at}
    P:workers:seen                zset     worker id, score last_seen
    P:live                        hash     worker id -> "<run_id> <client id>" of its
                                           liveness token connection, or "reaped"
                                           (issue #22, liveness.py)
    P:leader:{name}               hash     holder, term, expires_at
    P:leader_term:{name}          string   INCR counter: the term survives expiry/release
    P:wake                        channel  pub/sub wake-ups: newline-separated queue names
    P:done                        channel  ids that became terminal, comma-separated (finish,
                                           cancel, reap publish; wait_for_finish listens)
    P:schedule:{name}             hash     last_tick, last_job_id, updated_at (schedules.py)
    P:schedules                   set      every schedule name with a recorded tick

The scripts build key names from the prefix instead of declaring them in KEYS, so this store
needs a standalone Redis (or a single-shard deployment), not Redis Cluster.

The class is assembled from one mixin per role, each in the file every store package names the
same way: ``schema.py`` (Lifecycle), ``producer.py`` (Producer; its async half in ``aio.py``),
``lease.py`` (Leases), ``maintenance.py`` and ``schedules.py`` (Maintenance), ``admin.py``
(Admin), ``liveness.py`` (Liveness: death detection); this module adds what every role shares
(the client, running a script, watching the server, closing, the clock, the declared
capabilities).
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

from tether._errors import StoreError, StoreFull, StoreUnavailable
from tether.stores._contract import Capabilities
from tether.stores._incident_watch import Watched
from tether.stores._redis import calls
from tether.stores._redis import memory as _memory
from tether.stores._redis import url as _url
from tether.stores._redis.admin import RedisAdmin
from tether.stores._redis.calls import ALLOW_OOM
from tether.stores._redis.calls import script_text as _script_text
from tether.stores._redis.connection import connect, io
from tether.stores._redis.lease import MIN_CLAIM_RECORD_MS, RedisLeases
from tether.stores._redis.liveness import RedisLiveness
from tether.stores._redis.maintenance import RedisMaintenance
from tether.stores._redis.producer import RedisProducer
from tether.stores._redis.schedules import RedisSchedules
from tether.stores._redis.schema import SCHEMA_VERSION, RedisSchema
from tether.stores._redis.waker import Waker
from tether.stores._redis.watch import ServerWatch

DEFAULT_PREFIX = _url.DEFAULT_PREFIX
_SCRIPTS = (
    "enqueue", "claim", "claim_flow", "heartbeat", "finish", "reap", "cancel", "retry_failed",
    "fenced_write", "prune", "leader_acquire", "leader_renew", "leader_release",
    "worker_register", "worker_unregister", "list_jobs", "counts", "observe", "job_links",
)  # fmt: skip


class RedisStore(RedisSchema, RedisProducer, RedisLeases, RedisMaintenance, RedisSchedules,
                 RedisAdmin, RedisLiveness, Watched):
    """A tether store on a standalone Redis >= 5 (or Valkey); see the module docstring."""

    kind = "redis"
    _watch: ServerWatch
    #: No transactional enqueue or completion: Redis has no transaction a caller's own
    #: commands and the store's scripts could share.
    #: Death detection: a dedicated, named connection per worker process (liveness.py).
    capabilities = Capabilities(detects_death=True)

    def __init__(self, url: str, *, prefix: str | None = None, deadline: float | None = None,
                 **options: Any) -> None:
        checked = _url.parse(url, prefix, deadline)
        self.prefix = checked.prefix
        self._url = checked.shown
        self._allow_eviction = checked.allow_eviction
        #: Seconds a call waits for a server that does not answer (:mod:`_deadline`).
        self.deadline = checked.deadline
        self._client = connect(checked.client_url, options, self.deadline)
        self._client_url, self._options = checked.client_url, options  # the async producer's
        self._scripts = {n: self._client.register_script(_script_text(n)) for n in _SCRIPTS}
        self._watch = ServerWatch(f"{self._url} prefix {self.prefix!r}")
        # A lost subscription means the server went away: look for a restart at once after.
        self._waker = Waker(self._client, f"{self.prefix}:wake", self._watch.soon,
                            done_channel=f"{self.prefix}:done",
                            signal_channel=f"{self.prefix}:signal")
        self._marks = threading.local()  # per thread: wake-up mark taken before its claim
        self._flagged = False  # ALLOW_OOM scripts chosen for this server (_flag_scripts)

    def _run(self, name: str, *args: Any) -> Any:
        if name in ALLOW_OOM and not self._flagged:
            self._flag_scripts()
        try:
            with io():
                return calls.run(self._scripts[name], [self.prefix, *args])
        except StoreFull:
            _memory.refused(self._url)  # claims wait for room (memory.py)
            raise
        except StoreUnavailable:
            self._watch.soon()  # the server may be restarting: look as soon as it answers
            raise

    def _flag_scripts(self) -> None:
        """On Redis >= 7, run the ALLOW_OOM scripts with their flag (calls.py); decided once,
        from INFO server (a server that hides its version gets the plain scripts)."""
        try:
            with io():
                version = str(self._client.info("server").get("redis_version", "0"))
        except StoreUnavailable:
            raise
        except StoreError:
            version = "0"  # INFO refused: the plain scripts work everywhere
        self._flagged = True
        major = version.split(".", 1)[0]
        if major.isdigit() and int(major) >= 7:
            for n in ALLOW_OOM:
                self._scripts[n] = self._client.register_script(_script_text(n, True))

    def _room(self) -> None:
        """StoreFull while this server refused a write for memory and has no room yet."""
        with io():
            _memory.check_room(self._url, self._client)

    def _ops(self, name: str, *args: str) -> Any:
        scripts: dict[str, Any] = self.__dict__.setdefault("_ops_scripts", {})
        if name not in scripts:
            scripts[name] = self._client.register_script(_script_text(name))
        with io():
            return calls.run(scripts[name], [self.prefix, *args])

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def _observe(self, *, create: bool = False) -> None:
        """Look for a restart or data loss (see watch.py); never fails the caller's call."""
        epoch, run_id = self._watch.known()
        fresh = secrets.token_hex(16)
        flag = "1" if create else "0"
        try:
            reply = self._run("observe", epoch, run_id, fresh, flag, str(SCHEMA_VERSION))
        except StoreError:
            if create:
                raise
            return
        self._watch.update(reply)

    def _observe_if_due(self) -> None:
        if self._watch.due():
            self._observe()

    # -- what every role shares (migrate, check_schema, info: RedisSchema) ------------------
    def close(self) -> None:
        self._close_aio()
        self._waker.close()
        self._client.close()

    def now(self) -> float:
        with io():
            seconds, micros = self._client.time()
        return int(seconds) + int(micros) / 1_000_000


__all__ = ["DEFAULT_PREFIX", "MIN_CLAIM_RECORD_MS", "SCHEMA_VERSION", "RedisStore"]
