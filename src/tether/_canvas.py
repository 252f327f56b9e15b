"""Workflows built from signatures: ``tether.chain``, ``tether.group``, ``tether.chord``.

A signature (``task.s(*args, **kwargs)``) is a call not made yet. A canvas of them becomes
jobs linked by ``after`` (issue #20; the store releases each when its parents are done, in
the write that finishes the last one: docs/workflows.md). How a step receives the result
of the step before it is written in its payload's envelope, ``[args, kwargs, {"pipe":
"one"|"all"}]``, and the worker prepends it to the positional arguments: so the store never
reads a payload, and a worker in another language can follow the same rule.

Enqueueing is planned first, then written in as few round trips as the links allow: every
job is built and checked before anything is written (bad arguments in step 9 write nothing),
then the jobs go level by level, one batch each (a parent must exist before the child that
names it: the store refuses unknown ids). A group of 10,000 signatures is one batch; a chain
of n steps is n. With ``conn=`` (PostgreSQL) all of it is one transaction of the caller's;
otherwise a producer that dies half way leaves the first levels enqueued and not the rest
(each level is replay-safe on its own, like any enqueue).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, Union

from tether import _limits as limits
from tether._jobid import JobId
from tether._newjob import After, parent_ids
from tether.stores._contract import NewJob

__all__ = ["Signature", "WorkflowIds", "chain", "chord", "group"]

R = TypeVar("R")
#: What a signature's ``set`` takes: the enqueue options of ``task.enqueue_with`` that make
#: sense per job (``after`` and ``conn`` belong to the whole workflow's ``enqueue``).
SET_OPTIONS = frozenset({"delay", "run_at", "priority", "unique_key", "queue", "limit_key",
                         "allow_failure"})
Node = Union["Signature[Any]", "chain", "group", "chord"]


class WorkflowHost(Protocol):
    """What a workflow writes through: a task's runtime (``tether._task.Host``, which imports
    this module for ``task.s``, hence a protocol here rather than an import)."""

    def enqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]: ...

    async def aenqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]: ...


class SignedTask(Protocol):
    """What a signature uses of its task (``tether.Task``)."""

    @property
    def name(self) -> str: ...

    @property
    def runtime(self) -> WorkflowHost: ...

    def new_job(self, args: Sequence[Any], kwargs: dict[str, Any], *,
                delay: float | None = None, run_at: float | datetime | None = None,
                priority: int | None = None, unique_key: str | None = None,
                queue: str | None = None, limit_key: str | int | None = None,
                after: After = None, allow_failure: bool = False,
                pipe: str | None = None) -> NewJob: ...


@dataclass(frozen=True, slots=True)
class WorkflowIds:
    """What enqueueing a workflow made. ``ids``: every job, in the order they were planned
    (depth first, left to right); ``leaves``: the jobs whose results are the workflow's
    result (a chain's or chord's last job; each member's last job for a group)."""

    ids: tuple[JobId[Any], ...]
    leaves: tuple[JobId[Any], ...]

    @property
    def last(self) -> JobId[Any]:
        """The one final job (a chain, a chord): ``app.wait(run.last)`` is the result."""
        if len(self.leaves) != 1:
            raise ValueError(f"this workflow ends in {len(self.leaves)} jobs: use .leaves")
        return self.leaves[0]


@dataclass
class _Step:
    job: NewJob | None  # None: a job that exists already (``enqueue(after=...)``)
    parents: tuple[int, ...] = ()  # indexes of steps
    level: int = -1


@dataclass
class _Plan:
    """The jobs of one workflow, each knowing its parents by index, before any has an id."""

    runtime: WorkflowHost | None = None
    steps: list[_Step] = field(default_factory=list)
    known: dict[int, int] = field(default_factory=dict)  # step index -> existing job id

    def existing(self, job_id: int) -> int:
        self.steps.append(_Step(None))
        self.known[len(self.steps) - 1] = job_id
        return len(self.steps) - 1

    def add(self, task: SignedTask, job: NewJob, parents: tuple[int, ...]) -> int:
        if self.runtime is None:
            self.runtime = task.runtime
        elif task.runtime is not self.runtime:
            raise ValueError(f"{task.name} belongs to another app than the workflow's first "
                             "task: a workflow's jobs go to one store")
        if len(parents) > limits.MAX_AFTER:
            raise ValueError(f"{task.name} would wait for {len(parents)} jobs; at most "
                             f"{limits.MAX_AFTER} (a chord's fan-in)")
        level = max((self.steps[p].level for p in parents), default=-1) + 1
        self.steps.append(_Step(job, parents, level))
        return len(self.steps) - 1

    def levels(self) -> list[list[int]]:
        """Indexes of the jobs to write, a batch per level: each batch's parents are
        written by the batches before it."""
        out: dict[int, list[int]] = {}
        for i, step in enumerate(self.steps):
            if step.job is not None:
                out.setdefault(step.level, []).append(i)
        return [out[k] for k in sorted(out)]

    def batch(self, indexes: list[int], ids: dict[int, int]) -> list[NewJob]:
        out = []
        for i in indexes:
            step = self.steps[i]
            assert step.job is not None
            after = tuple(dict.fromkeys(ids[p] for p in step.parents))
            out.append(replace(step.job, after=after))
        return out


@dataclass(frozen=True, slots=True)
class _Placed:
    """Where a node ended: the steps its result comes from, and how a next step gets it
    (``one``: a single value; ``all``: the list, a group's)."""

    indexes: tuple[int, ...]
    leaves: tuple[int, ...]
    shape: str


class _Canvas:
    """A node of a workflow: it places its jobs in a plan, after given parents."""

    def _place(self, plan: _Plan, parents: tuple[int, ...], pipe: str | None) -> _Placed:
        raise NotImplementedError


def _plan(node: _Canvas, after: After) -> tuple[_Plan, _Placed]:
    plan = _Plan()
    parents = tuple(plan.existing(i) for i in parent_ids(after))
    placed = node._place(plan, parents, None)  # jobs after existing ones get no result
    assert plan.runtime is not None  # every node holds at least one signature
    return plan, placed


def _ids(placed: _Placed, ids: dict[int, int]) -> WorkflowIds:
    return WorkflowIds(tuple(JobId(ids[i]) for i in placed.indexes),
                       tuple(JobId(ids[i]) for i in placed.leaves))


def _enqueue(node: _Canvas, after: After, conn: Any) -> WorkflowIds:
    plan, placed = _plan(node, after)
    assert plan.runtime is not None
    ids = dict(plan.known)
    for level in plan.levels():
        got = plan.runtime.enqueue_jobs(plan.batch(level, ids), conn=conn)
        ids.update(zip(level, got, strict=True))
    return _ids(placed, ids)


async def _aenqueue(node: _Canvas, after: After, conn: Any) -> WorkflowIds:
    plan, placed = _plan(node, after)
    assert plan.runtime is not None
    ids = dict(plan.known)
    for level in plan.levels():
        got = await plan.runtime.aenqueue_jobs(plan.batch(level, ids), conn=conn)
        ids.update(zip(level, got, strict=True))
    return _ids(placed, ids)


class _Workflow(_Canvas):
    """chain, group and chord: enqueued as a whole, answering every id they made."""

    def enqueue(self, *, after: After = None, conn: Any = None) -> WorkflowIds:
        """Enqueue every job of the workflow (a round trip per level of it). ``after``: job
        ids its first steps wait for (they are not given their results); ``conn``: inside
        the caller's database transaction (PostgreSQL), all or nothing."""
        return _enqueue(self, after, conn)

    async def aenqueue(self, *, after: After = None, conn: Any = None) -> WorkflowIds:
        """:meth:`enqueue` for ``async`` code: never blocks the event loop."""
        return await _aenqueue(self, after, conn)


class Signature(_Canvas, Generic[R]):
    """A task with its arguments, not enqueued yet (``task.s(...)``, or ``task.si(...)``:
    immutable, never given the previous step's result)."""

    def __init__(self, task: SignedTask, args: tuple[Any, ...] = (),
                 kwargs: dict[str, Any] | None = None, *, immutable: bool = False,
                 options: dict[str, Any] | None = None) -> None:
        self.task = task
        self.args = args
        self.kwargs = dict(kwargs or {})
        self.immutable = immutable
        self.options = dict(options or {})

    def set(self, **options: Any) -> Signature[R]:
        """A copy with enqueue options for this job: ``delay``, ``run_at``, ``priority``,
        ``unique_key``, ``queue``, ``limit_key``, ``allow_failure`` (run even if a parent
        failed or was cancelled; its piped result is then None)."""
        unknown = sorted(options.keys() - SET_OPTIONS)
        if unknown:
            raise TypeError(f"Signature.set() takes {', '.join(sorted(SET_OPTIONS))}; not "
                            f"{', '.join(unknown)} (after= and conn= go to enqueue())")
        return Signature(self.task, self.args, self.kwargs, immutable=self.immutable,
                         options={**self.options, **options})

    def _place(self, plan: _Plan, parents: tuple[int, ...], pipe: str | None) -> _Placed:
        job = self.task.new_job(
            self.args, self.kwargs, pipe=None if self.immutable or not parents else pipe,
            **self.options)
        index = plan.add(self.task, job, parents)
        return _Placed((index,), (index,), "one")

    def enqueue(self, *, after: After = None, conn: Any = None) -> JobId[R]:
        """Enqueue this one job (``after``: job ids it waits for, without their results)."""
        return _enqueue(self, after, conn).last

    async def aenqueue(self, *, after: After = None, conn: Any = None) -> JobId[R]:
        return (await _aenqueue(self, after, conn)).last

    def __repr__(self) -> str:
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task.name}.{'si' if self.immutable else 's'}({call})"


def _nodes(items: tuple[Any, ...], what: str) -> tuple[Node, ...]:
    """``f(a, b)`` or ``f([a, b])``: the nodes, each checked."""
    if len(items) == 1 and not isinstance(items[0], _Canvas) and isinstance(items[0], Iterable):
        items = tuple(items[0])
    for item in items:
        if not isinstance(item, _Canvas):
            raise TypeError(f"{what} takes signatures (task.s(...)), chains, groups and "
                            f"chords, got {item!r}")
    return items


class chain(_Workflow):  # lower case, as Celery names it: what users know
    """Steps one after the other: each waits for the previous one and is given its result
    first (a group's: the list of its members' results, as a chord's callback)."""

    def __init__(self, *steps: Node | Iterable[Node]) -> None:
        self.steps = _nodes(steps, "chain")
        if not self.steps:
            raise ValueError("a chain needs at least one step")

    def _place(self, plan: _Plan, parents: tuple[int, ...], pipe: str | None) -> _Placed:
        indexes: list[int] = []
        placed = None
        for step in self.steps:
            if placed is not None:
                parents, pipe = placed.leaves, placed.shape
            placed = step._place(plan, parents, pipe)
            indexes.extend(placed.indexes)
        assert placed is not None
        return _Placed(tuple(indexes), placed.leaves, placed.shape)

    def __repr__(self) -> str:
        return f"chain({', '.join(map(repr, self.steps))})"


class group(_Workflow):
    """Members that run in parallel (each after what the group comes after). Their results,
    in member order, are what a next step (a chord's callback) is given."""

    def __init__(self, *members: Node | Iterable[Node]) -> None:
        self.members = _nodes(members, "group")
        if not self.members:
            raise ValueError("a group needs at least one member")

    def _place(self, plan: _Plan, parents: tuple[int, ...], pipe: str | None) -> _Placed:
        indexes: list[int] = []
        leaves: list[int] = []
        for member in self.members:
            placed = member._place(plan, parents, pipe)
            indexes.extend(placed.indexes)
            leaves.extend(placed.leaves)
        return _Placed(tuple(indexes), tuple(leaves), "all")

    def __repr__(self) -> str:
        return f"group({', '.join(map(repr, self.members))})"


class chord(_Workflow):
    """A group, then a callback after every member, given the list of their results."""

    def __init__(self, header: group | Sequence[Node], body: Node) -> None:
        self.header = header if isinstance(header, group) else group(*header)
        self.body = _nodes((body,), "chord")[0]

    def _place(self, plan: _Plan, parents: tuple[int, ...], pipe: str | None) -> _Placed:
        head = self.header._place(plan, parents, pipe)
        body = self.body._place(plan, head.leaves, "all")
        return _Placed(head.indexes + body.indexes, body.leaves, body.shape)

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"

