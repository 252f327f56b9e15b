"""The pipe protocol between a worker and its process-pool children.

Invariant: user data crosses the process boundary as JSON *text*, verbatim. A job's payload
reaches the child character for character as the store holds it, and results, checkpoints and
progress come back as the text the store will hold. Nothing is pickled: a message cannot run
code in the process that reads it.

A message is a 4-byte length (little-endian) and that many bytes of ``marshal`` data: the pair
(header, blobs), the header a dict of plain values (``op`` names the message), the blobs the
texts it carries (None for none). ``marshal`` loads only plain values (a code object it could
load is never called: a header is checked to be a dict, the blobs a list); both ends run the
same interpreter (the child is started with the worker's ``sys.executable``), so they share its
format. It replaced a JSON header line with raw blobs after it (session 12): a batch of jobs
encoded as JSON cost the worker about 8 us a job and the child 6 us to parse, marshal about a
tenth of that, and the per-job messages both ways (``outcome``, ``start``) a third. A text
travels as its UTF-8 bytes either way.

Messages, parent to child: ``init`` (spec, sys.path, log level, recycling limits), ``run``
(``job``: the job as a row of fields, its texts verbatim; several may be queued: jobs sent
ahead), ``runs`` (several jobs in one message: ``jobs``, a list of rows; the child queues them
as ``run``), ``withdraw`` (a job sent ahead must not start), ``reply`` (to a fenced write, or to a
``read``: blob, the parents as JSON text), ``stop`` (why the
running attempt is being stopped; SIGTERM follows). Child to parent: ``ready``, ``fatal`` (the
app could not be loaded), ``start`` (the next job's handler starts now; the outcomes owed
are in the same write, before it; a ``start`` field on the last one stands for it),
``outcome`` (how the attempt ended; blobs: result, error),
``skipped`` (a withdrawn job was dropped unstarted), ``retire`` (recycled: it starts nothing
more), ``write`` (a checkpoint or progress value for the parent to store, fenced), ``read``
(a workflow step's parents, which the parent reads from its store: ``tether._parents``). Several
messages may share one write; a reader cuts them apart.
"""

from __future__ import annotations

import dataclasses
import marshal
import operator
import os
import select
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tether.stores._contract import JobRecord, Lease, Outcome
from tether.stores._records import job_of as _record_of

Header = dict[str, Any]
Message = tuple[Header, list[str | None]]

# A job crosses as a row of every JobRecord field in the record's order but these, which a
# child does not get: the error texts of earlier attempts and the result (None while running).
_NOT_SENT = {"last_error": None, "result": None, "errors": "[]"}
_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(JobRecord) if f.name not in _NOT_SENT)
_ROW = operator.attrgetter(*_JOB_FIELDS)  # the row of a job, in C
# Where the child puts back what was not sent (ascending, so each insert lands in place).
_FILL = tuple((i, _NOT_SENT[f.name]) for i, f in enumerate(dataclasses.fields(JobRecord))
              if f.name in _NOT_SENT)
_ID, _ATTEMPT = _JOB_FIELDS.index("id"), _JOB_FIELDS.index("attempt")
_FIXED = 64 + 24 * len(_JOB_FIELDS)  # a job's row, but for its texts
_PAYLOAD = [f.name for f in dataclasses.fields(JobRecord)].index("payload")  # in a whole row
OUTCOME_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "snoozed"})


class ProtocolError(Exception):
    """The other side sent something that is not a message (it died mid-write, or a bug)."""


_LENGTH = struct.Struct("<I")
#: A length above this is not a message (the writer died mid-write, or a bug).
MAX_MESSAGE = 1 << 30


def encode(header: Header, blobs: Sequence[str | None] = ()) -> bytes:
    body = marshal.dumps((header, list(blobs)))
    return _LENGTH.pack(len(body)) + body


class Reader:
    """Reads messages from a pipe: one ``os.read`` per burst, messages cut from a buffer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()
        self._pos = 0  # where the next message starts in _buf
        self._closed = False

    def read(self) -> Message | None:
        """The next message (blocking), or None at end of file."""
        while True:
            msg = self._cut()
            if msg is not None:
                return msg
            if not self._fill():
                if len(self._buf) > self._pos:
                    raise ProtocolError("truncated message")
                return None

    def read_nowait(self) -> Message | None:
        """A message that has fully arrived, or None; never blocks."""
        msg = self._cut()
        while msg is None and select.select([self.fd], [], [], 0)[0] and self._fill():
            msg = self._cut()
        return msg

    def buffered(self) -> bool:
        """Bytes of a next message have arrived already."""
        return len(self._buf) > self._pos

    def read_ready(self) -> list[Message]:
        """Every message that has fully arrived, with at most one read; never blocks."""
        out: list[Message] = []
        while (msg := self._cut()) is not None:
            out.append(msg)
        if select.select([self.fd], [], [], 0)[0] and self._fill():
            while (msg := self._cut()) is not None:
                out.append(msg)
        return out

    def take(self) -> list[Message] | None:
        """Every message that has arrived, with exactly one read (which waits for data when
        none is there); None at end of file, ProtocolError if a message was cut short."""
        if not self._fill():
            if len(self._buf) > self._pos:
                raise ProtocolError("truncated message")
            return None
        out: list[Message] = []
        while (msg := self._cut()) is not None:
            out.append(msg)
        return out

    def _fill(self) -> bool:
        if self._pos:  # drop what was cut (once per read, not once per message)
            del self._buf[:self._pos]
            self._pos = 0
        data = os.read(self.fd, 65536)
        self._buf += data
        return bool(data)

    def _cut(self) -> Message | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _LENGTH.unpack_from(buf, pos)
        if size > MAX_MESSAGE:
            raise ProtocolError(f"message of {size} bytes")
        end = pos + 4 + size
        if len(buf) < end:
            return None
        try:
            header, blobs = marshal.loads(buf[pos + 4:end])
        except (ValueError, EOFError, TypeError) as exc:
            raise ProtocolError(f"bad message: {exc}") from None
        if (not isinstance(header, dict) or not isinstance(header.get("op"), str)
                or not isinstance(blobs, list)):
            raise ProtocolError("not a message")
        self._pos = end
        return header, blobs

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.fd)


class Writer:
    """Writes whole messages to a pipe; thread-safe (one message at a time)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._lock = threading.Lock()

    def send(self, header: Header, blobs: Sequence[str | None] = ()) -> None:
        """Raises OSError when the pipe is closed (the other side died, or close() ran)."""
        self.send_bytes(encode(header, blobs))

    def send_many(self, messages: Sequence[Message]) -> None:
        """Several messages in one write (one wake-up of the reader)."""
        self.send_bytes(b"".join(encode(h, b) for h, b in messages))

    def send_bytes(self, data: bytes) -> None:
        self.flush(lambda: data)

    def flush(self, take: Callable[[], bytes]) -> None:
        """Write what ``take()`` returns, called under this writer's lock: what callers take
        in turn is written in turn."""
        with self._lock:
            if self._fd is None:
                raise BrokenPipeError("pipe closed")
            view = memoryview(take())
            while view:
                view = view[os.write(self._fd, view):]

    def close(self) -> None:
        """Close the pipe (the reader sees end of file); later sends raise, never hit a reused
        descriptor number."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


# -- jobs and outcomes ----------------------------------------------------------------------
def run_size(job: JobRecord) -> int:
    """An upper bound of the bytes ``job`` adds to a ``runs`` message, without encoding it: a
    character takes at most 4 bytes (UTF-8), 6 counted for the short texts; any field's own
    framing at most 24."""
    # Written out, no loop: it runs for every job the worker claims.
    texts = (len(job.task) + len(job.queue) + len(job.status) + len(job.locked_by or "")
             + len(job.failure_reason or "") + len(job.unique_key or "")
             + len(job.lease_token or "") + len(job.uid or "") + len(job.limit_key or ""))
    blobs = len(job.payload or "") + len(job.checkpoint or "") + len(job.progress or "")
    return _FIXED + 6 * texts + 4 * blobs


def encode_runs(jobs: Sequence[JobRecord]) -> bytes:
    """One ``runs`` message for several jobs, in order: one message to encode here and one to
    load in the child, instead of one per job. The child queues them as ``run`` messages."""
    return encode({"op": "runs", "jobs": [_ROW(job) for job in jobs]})


def split_runs(header: Header, blobs: list[str | None]) -> list[Message]:
    """The ``run`` messages a ``runs`` message carries, in order."""
    jobs = header["jobs"]
    if blobs or not all(len(row) == len(_JOB_FIELDS) for row in jobs):
        raise ProtocolError("runs: not rows of jobs")
    return [({"op": "run", "job": row}, []) for row in jobs]


def run_key(header: Header) -> tuple[int, int]:
    """(job id, attempt) of a ``run`` message."""
    job = header["job"]
    return job[_ID], job[_ATTEMPT]


def job_of(header: Header, blobs: list[str | None]) -> JobRecord:
    row = list(header["job"])
    for at, value in _FILL:
        row.insert(at, value)
    if row[_PAYLOAD] is None:
        row[_PAYLOAD] = "[[], {}]"
    return _record_of(row)


def outcome_message(lease: Lease, outcome: Outcome | None) -> Message:
    header: Header = {"op": "outcome", "job": lease.job_id, "attempt": lease.attempt}
    if outcome is None:
        return {**header, "kind": None}, []
    header.update(kind=outcome.kind, reason=outcome.reason, delay=outcome.retry_delay)
    return header, [outcome.result, outcome.error]


def outcome_of(header: Header, blobs: list[str | None], lease: Lease) -> Outcome | None:
    """The Outcome a child reported, under the parent's own lease; ProtocolError if malformed."""
    kind = header.get("kind")
    if kind is None:
        return None
    if kind not in OUTCOME_KINDS or len(blobs) != 2:
        raise ProtocolError(f"bad outcome {kind!r}")
    reason = header.get("reason")
    return Outcome(lease, kind, result=blobs[0], error=blobs[1], reason=reason,
                   retry_delay=float(header.get("delay") or 0.0))
