"""Reading jobs and the worker registry of the Redis store (a mixin of ``RedisStore``).

Kept apart from the lease protocol in ``store.py``: nothing here is fenced or on a worker's
hot path except ``register_worker`` (once per worker start). Listings and counts are Lua
scripts so each answer is one consistent snapshot; see the scripts for why they are shaped so.
"""

from __future__ import annotations

import json
from typing import Any, cast

import redis

from tether import _limits as limits
from tether._errors import StoreError
from tether.stores._contract import JobRecord, JobStatus, QueueCount, WorkerInfo
from tether.stores._redis import rows as codec
from tether.stores._redis.connection import io


class Inspection:
    """get_job, list_jobs, counts and the workers rows; needs ``_client``/``_run``/``_key``."""

    _client: redis.Redis

    def _run(self, name: str, *args: Any) -> Any:  # pragma: no cover - RedisStore's
        raise NotImplementedError

    def _key(self, *parts: str) -> str:  # pragma: no cover - RedisStore's
        raise NotImplementedError

    # -- inspection --------------------------------------------------------------------------
    def get_job(self, job_id: int) -> JobRecord | None:
        job_id = limits.check_job_id(job_id)
        with io():
            row = self._client.hgetall(self._key("job", str(job_id)))
        return codec.job_from_dict(cast(dict[str, str], row)) if row else None

    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        limit = limits.check_page(limit)
        after = str(int(after_id)) if after_id is not None else "-inf"
        rows = self._run("list_jobs", status or "", queue or "", after, str(int(limit)))
        return [codec.job_from_flat(row) for row in rows]

    def counts(self) -> list[QueueCount]:
        flat = self._run("counts")
        return [
            QueueCount(str(flat[i]), cast(JobStatus, flat[i + 1]), int(flat[i + 2]))
            for i in range(0, len(flat), 3)
        ]

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        info = {
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "concurrency": worker.concurrency,
        }
        self._run("worker_register", codec.now_arg(now), worker.id, json.dumps(info))

    def unregister_worker(self, worker_id: str) -> None:
        self._run("worker_unregister", worker_id)

    def list_workers(self) -> list[WorkerInfo]:
        with io():
            pipe = self._client.pipeline(transaction=True)
            pipe.hgetall(self._key("workers"))
            pipe.zrange(self._key("workers:seen"), 0, -1, withscores=True)
            rows, seen = pipe.execute()
        last_seen = {str(member): float(score) for member, score in seen}
        workers = []
        for worker_id, text in sorted(rows.items()):
            try:
                d = json.loads(text)
            except ValueError as exc:
                raise StoreError(f"redis worker row {worker_id!r} does not decode: {exc}") from exc
            workers.append(
                WorkerInfo(
                    id=worker_id,
                    host=str(d["host"]),
                    pid=int(d["pid"]),
                    queues=tuple(str(q) for q in d["queues"]),
                    concurrency=int(d["concurrency"]),
                    started_at=float(d["started_at"]),
                    last_seen=last_seen.get(worker_id, float(d["started_at"])),
                )
            )
        return workers
