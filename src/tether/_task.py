"""Tasks: a function plus how its jobs are queued, retried and bounded.

``Task[P, R]`` keeps the function's parameters ``P`` and result ``R`` for the type checker:
``enqueue`` takes exactly the function's arguments and returns a ``JobId[R]``, which
``app.wait`` turns back into an ``R``. Arguments and results cross the store as JSON made by the
app's codec (:mod:`tether._codec`), decoded in the worker by the function's annotations.

A task holds the runtime it was registered on (:class:`tether._runtime.Runtime`), not the App,
and names it by what it uses (:class:`Host`): the runtime's registry holds the tasks, so this
module must not import the runtime.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, overload

from tether import _payload as payload
from tether._backoff import Backoff
from tether._codec import Codec, JSONCodec, decodes_as_is, to_text, type_hints
from tether._flow import key_of, key_reader
from tether._jobid import JobId
from tether._newjob import (
    OPTIONS,
    PIPES,
    After,
    TaskOptions,
    batch_job,
    batch_payloads,
    check_limit_key,
    check_options,
    encode_call,
    make_new_job,
)
from tether.stores._contract import FlowLimit, NewJob

if TYPE_CHECKING:
    from tether._canvas import Signature

__all__ = ["OPTIONS", "BadArguments", "Enqueuer", "Host", "Task", "TaskDecorator",
           "TaskOptions", "check_options", "make_new_job"]

if TYPE_CHECKING:  # defaults (PEP 696): a bare ``Task`` is ``Task[..., Any]`` to mypy --strict
    from typing_extensions import ParamSpec, TypeVar

    P = ParamSpec("P", default=...)
    R = TypeVar("R", default=Any)
else:
    P = typing.ParamSpec("P")
    R = typing.TypeVar("R")


class Host(Protocol):
    """What a task uses of its runtime: the codec its values cross the store in, the
    enqueue seam every producer call goes through (which tracing wraps), and the store's URL
    (by which an integration decides how a job joins the caller's transaction)."""

    @property
    def codec(self) -> Codec: ...

    @property
    def url(self) -> str: ...

    def enqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]: ...

    async def aenqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]: ...


class TaskDecorator(Protocol):
    """What ``app.task(name=..., ...)`` returns: registers a function, keeping its types
    (an ``async def`` task's result type is what its coroutine returns)."""

    @overload
    def __call__(self, func: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> Task[P, R]: ...


class PipeSource(Protocol):
    """Where a workflow step's piped value comes from: the running attempt's context
    (:meth:`tether.JobContext.piped`), which reads the parents' results from the store."""

    def piped(self, pipe: str) -> Any: ...


class BadArguments(TypeError):
    """A job's stored arguments do not fit its task's function (not [args, kwargs], they do
    not bind to its signature, or the codec cannot decode them as the annotations say).
    Running the handler again cannot fix that, so the job is dead-lettered at once with
    reason ``bad_arguments``."""


class Task(Generic[P, R]):
    """A registered function. Call it directly to run it inline; ``enqueue`` to queue it."""

    def __init__(self, runtime: Host, func: Callable[..., Any], options: TaskOptions) -> None:
        check_options(options)
        self.runtime = runtime
        self.func = func
        self.config = options
        self.is_async = inspect.iscoroutinefunction(func)
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", options.name)
        try:
            self._signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # some builtins have none: the call itself will tell
            self._signature = None
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        params = self._signature.parameters.values() if self._signature else ()
        #: The function's parameters that a keyword can name.
        self.params = frozenset(p.name for p in params if p.kind in named)
        #: Enqueue options that are also parameter names of the function: ambiguous keywords.
        self.shadowed = OPTIONS & self.params
        self._hints: dict[str, Any] | None = None  # resolved on first use: forward refs
        self._needs_decoding: bool | None = None
        #: Call shapes (positional count, keyword names) known to bind: binding depends on
        #: nothing else, and ``Signature.bind`` was a tenth of a no-op job's worker time.
        self._fits: set[tuple[int, frozenset[str]]] = set()
        #: Reads the limit key out of a call's arguments (``limit_key=``), or None.
        self._key: Callable[[Sequence[Any], Mapping[str, Any]], str] | None = None
        if options.limit_key is not None:
            self._key = key_reader(options.name, func, options.limit_key)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def options(self) -> Options[P, R]:
        """The task's settings (``task.options.queue``...), and, called, a typed enqueuer
        with enqueue options: ``task.options(delay=5).enqueue(...)``."""
        return Options(self)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tether.Task {self.name} queue={self.config.queue}>"

    # -- the codec ---------------------------------------------------------------------------
    @property
    def codec(self) -> Codec:
        return self.runtime.codec

    @property
    def hints(self) -> dict[str, Any]:
        """The function's resolved annotations (``return`` included); {} when unresolvable."""
        if self._hints is None:
            self._hints = type_hints(self.func)
        return self._hints

    def arguments(self, payload_text: str, source: PipeSource | None = None) \
            -> tuple[list[Any], dict[str, Any]]:
        """Decode a job's payload, check that it binds to the function's signature, and decode
        each argument by its parameter's annotation.

        ``source``: the running attempt, for a workflow step whose envelope says ``pipe``:
        its parents' result(s) become the first positional argument, decoded by that
        parameter's annotation like any other. Without it (a job shown by the CLI or the
        dashboard) the stored arguments are decoded as they are."""
        try:
            args, kwargs, envelope = payload.decode_envelope(payload_text)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise BadArguments(f"the stored arguments of {self.name} are not "
                               f"[args, kwargs] JSON: {exc}") from None
        if envelope is not None and source is not None and "pipe" in envelope:
            pipe = envelope["pipe"]
            if pipe not in PIPES:
                raise BadArguments(f"the stored arguments of {self.name} ask for pipe "
                                   f"{pipe!r}; tether knows {sorted(PIPES)}")
            args = [source.piped(pipe), *args]
        if self._signature is None:
            return args, kwargs
        shape = (len(args), frozenset(kwargs))
        if shape not in self._fits:
            try:
                self._signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise BadArguments(f"the stored arguments do not fit {self.name}: {exc}") \
                    from None
            if len(self._fits) < 64:
                self._fits.add(shape)
        if not self._decodes():
            return args, kwargs
        return self._decode(args, kwargs, self.hints)

    def _decodes(self) -> bool:
        """Whether the arguments need the codec: not when every parameter's annotation is one
        the default codec returns as it is (``int``, ``str``, ``dict[str, Any]``...)."""
        if self._needs_decoding is None:
            params = {k: v for k, v in self.hints.items() if k != "return"}
            codec = self.codec
            default = isinstance(codec, JSONCodec) and type(codec).decode is JSONCodec.decode
            self._needs_decoding = bool(params) and not (
                default and all(decodes_as_is(h) for h in params.values()))
        return self._needs_decoding

    def _decode(self, args: list[Any], kwargs: dict[str, Any], hints: dict[str, Any]) \
            -> tuple[list[Any], dict[str, Any]]:
        """Each argument decoded by the annotation of the parameter it binds to; the call keeps
        its shape (what came positional stays positional)."""
        assert self._signature is not None
        params = list(self._signature.parameters.values())
        positional = [p for p in params if p.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        star = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), "")
        stars = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), "")
        codec = self.codec
        name = ""
        try:
            out_args = []
            for i, value in enumerate(args):
                name = positional[i].name if i < len(positional) else star
                out_args.append(codec.decode(value, hints.get(name, Any)))
            out_kwargs = {}
            for key, value in kwargs.items():
                name = key if key in self.params else stars
                out_kwargs[key] = codec.decode(value, hints.get(name, Any))
        except Exception as exc:  # a codec's refusal, whatever its class: data, not a crash
            raise BadArguments(f"the stored arguments of {self.name} do not decode as its "
                               f"annotations say ({name}): {type(exc).__name__}: {exc}") \
                from None
        return out_args, out_kwargs

    def encode_result(self, value: Any) -> str:
        """The handler's return value as JSON text, through the app's codec."""
        return to_text(self.codec, value, f"result of {self.name}")

    def decode_result(self, value: Any) -> Any:
        """A stored result (plain JSON) as the function's return annotation says."""
        return self.codec.decode(value, self.hints.get("return", Any))

    # -- producing ---------------------------------------------------------------------------
    def new_job(
        self,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        queue: str | None = None,
        limit_key: str | int | None = None,
        after: After = None,
        allow_failure: bool = False,
        pipe: str | None = None,
    ) -> NewJob:
        """One job of this task. ``limit_key``: the key its limits count it under; by default
        the value of the task's ``limit_key=`` argument in this call (None without one).
        ``after``, ``allow_failure``: the jobs it waits for (docs/workflows.md); ``pipe``:
        how their results reach it (a workflow step, :mod:`tether._canvas`)."""
        self.check_call(args, kwargs, piped=pipe is not None)
        opts = self.config
        if limit_key is not None:
            key: str | None = key_of(limit_key, self.name, "limit_key")
        else:
            key = None if self._key is None else self._key(args, kwargs)
        return make_new_job(
            self.name, args, kwargs, queue=opts.queue if queue is None else queue,
            priority=opts.priority if priority is None else priority,
            delay=delay, run_at=run_at, unique_key=unique_key,
            max_attempts=opts.max_attempts, max_stalls=opts.max_stalls, codec=self.codec,
            limit_key=key, after=after, allow_failure=allow_failure, pipe=pipe,
        )

    def check_call(self, args: Sequence[Any], kwargs: dict[str, Any], *,
                   piped: bool = False) -> None:
        """TypeError at enqueue for arguments the function cannot take (issue #24): found
        now, in the producer's traceback, not as a ``bad_arguments`` dead letter later.
        ``piped``: a workflow step that receives its parents' result as the first argument.
        Binding depends only on how many positional arguments and which keyword names, so a
        shape that fitted once (here or in :meth:`arguments`) is not bound again."""
        signature = self._signature
        if signature is None:
            return
        lead: tuple[Any, ...] = (None,) if piped else ()
        shape = (len(args) + len(lead), frozenset(kwargs))
        if shape in self._fits:
            return
        try:
            signature.bind(*lead, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"the arguments do not fit {self.name}{signature}: {exc}") from None
        if len(self._fits) < 64:
            self._fits.add(shape)

    def _split(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Take the enqueue options out of ``kwargs`` (run-time keywords of ``enqueue``)."""
        options = {k: kwargs.pop(k) for k in OPTIONS & kwargs.keys()}
        clash = sorted(self.shadowed & options.keys())
        if clash:
            names = ", ".join(clash)
            raise TypeError(
                f"{self.name} has a parameter named {names}, which is also an enqueue option: "
                f"pass the task's arguments with {self.__name__}.enqueue_with(args=(...), "
                f"kwargs={{{clash[0]!r}: ...}}) and options as keywords of enqueue_with"
            )
        return options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R]:
        """Queue one job; returns its id.

        Keywords named ``delay``, ``run_at``, ``priority``, ``unique_key``, ``queue``,
        ``limit_key``, ``after``, ``allow_failure`` and ``conn`` are enqueue options at run
        time (``conn``: enqueue inside that database transaction; ``after``: the job waits
        for these jobs, see docs/workflows.md); every other keyword is an argument of the
        task. The type checker only
        knows the function's own parameters: the typed way to pass options is
        ``task.options(delay=5).enqueue(...)`` or :meth:`enqueue_with`. When the function
        itself has a parameter with an option's name, the keyword is ambiguous and TypeError
        is raised rather than silently taking it as the option.
        """
        if kwargs and not OPTIONS.isdisjoint(kwargs):
            return self.enqueue_with(args, kwargs, **self._split(kwargs))
        return JobId(self.runtime.enqueue_jobs([self._plain_job(args, kwargs)])[0])

    def _plain_job(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NewJob:
        """:meth:`new_job` for a call without enqueue options (issue #23: the single enqueue's
        own Python cost). The task's name, queue, priority, max_attempts and max_stalls were
        checked when it was registered (:func:`check_options`; TaskOptions is frozen), so
        only what this call brings is checked here: the arguments' fit and encoding, and a
        limit key read from them (through :meth:`new_job`, which checks it)."""
        if self._key is not None:
            return self.new_job(args, kwargs)
        self.check_call(args, kwargs)
        opts = self.config
        return NewJob(task=opts.name, payload=encode_call(self.codec, args, kwargs, opts.name),
                      queue=opts.queue, priority=opts.priority, max_attempts=opts.max_attempts,
                      max_stalls=opts.max_stalls)

    def enqueue_with(
        self,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        queue: str | None = None,
        conn: Any = None,
        limit_key: str | int | None = None,
        after: After = None,
        allow_failure: bool = False,
    ) -> JobId[R]:
        """Queue one job with the task's arguments given apart from the options, so any
        argument name works (``kwargs={"delay": 5}`` is the task's ``delay``).
        ``limit_key``: the key the task's limits count this job under, instead of the value
        of its ``limit_key=`` argument. ``after``: job ids it waits for (it stays
        ``waiting`` until every one is done, and is cancelled if one fails, unless
        ``allow_failure``); see docs/workflows.md."""
        job = self.new_job(tuple(args), dict(kwargs or {}), delay=delay, run_at=run_at,
                           priority=priority, unique_key=unique_key, queue=queue,
                           limit_key=limit_key, after=after, allow_failure=allow_failure)
        return JobId(self.runtime.enqueue_jobs([job], conn=conn)[0])

    def _batch(self, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]],
               options: dict[str, Any]) -> list[NewJob]:
        """The jobs of one ``enqueue_many``. The options are the same for every job, so the
        first job is made by :meth:`new_job`, which checks them, and each later one is that
        job with its own payload and limit key (:func:`tether._newjob.batch_job`): only what
        differs from call to call is checked again (issue #23: the checks of options already
        checked were a third of the producer's time per job)."""
        jobs: list[NewJob] = []
        first: NewJob | None = None
        payload: Callable[[Sequence[Any], dict[str, Any]], str] | None = None
        key = self._key
        for call in calls:
            if not (isinstance(call, tuple | list) and len(call) == 2):
                raise TypeError("enqueue_many takes (args, kwargs) pairs")
            args, kwargs = tuple(call[0]), dict(call[1])
            if first is None:
                first = self.new_job(args, kwargs, **options)
                jobs.append(first)
                payload = batch_payloads(self.codec, self.name)
                continue
            assert payload is not None
            self.check_call(args, kwargs)
            limit_key = None if key is None else key(args, kwargs)
            if limit_key is not None:  # checked before the payload, as new_job does
                check_limit_key(limit_key)
            jobs.append(batch_job(first, payload(args, kwargs), limit_key))
        return jobs

    def enqueue_many(
        self,
        calls: Iterable[tuple[Sequence[Any], dict[str, Any]]],
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        conn: Any = None,
        after: After = None,
        allow_failure: bool = False,
    ) -> list[JobId[R]]:
        """Queue many jobs in one store round trip: ``calls`` is ``[(args, kwargs), ...]``;
        the options (as in :meth:`enqueue_with`) apply to every job of the batch (``after``:
        each waits for the same jobs, a fan-out)."""
        jobs = self._batch(calls, {"delay": delay, "run_at": run_at, "priority": priority,
                                   "queue": queue, "after": after,
                                   "allow_failure": allow_failure})
        return [JobId(i) for i in self.runtime.enqueue_jobs(jobs, conn=conn)]

    # -- workflows ----------------------------------------------------------------------------
    def s(self, *args: Any, **kwargs: Any) -> Signature[R]:
        """A signature: this task with these arguments, to compose with ``tether.chain``,
        ``tether.group`` and ``tether.chord`` (or enqueue alone). In a chain or chord the
        previous step's result comes first, before these arguments. Every keyword is an
        argument of the task: options go through ``.set(queue=..., delay=...)``."""
        from tether._canvas import Signature

        return Signature(self, tuple(args), dict(kwargs))

    def si(self, *args: Any, **kwargs: Any) -> Signature[R]:
        """An immutable signature: in a chain or chord it runs after the previous step but
        is not given its result."""
        from tether._canvas import Signature

        return Signature(self, tuple(args), dict(kwargs), immutable=True)

    # -- producing from an event loop ----------------------------------------------------------
    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R]:
        """:meth:`enqueue` for ``async`` code: never blocks the caller's event loop."""
        options = self._split(kwargs)
        conn = options.pop("conn", None)
        job = self.new_job(args, kwargs, **options)
        return JobId((await self.runtime.aenqueue_jobs([job], conn=conn))[0])

    async def aenqueue_many(
        self,
        calls: Iterable[tuple[Sequence[Any], dict[str, Any]]],
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        conn: Any = None,
        after: After = None,
        allow_failure: bool = False,
    ) -> list[JobId[R]]:
        """:meth:`enqueue_many` for ``async`` code: one round trip, one request id."""
        jobs = self._batch(calls, {"delay": delay, "run_at": run_at, "priority": priority,
                                   "queue": queue, "after": after,
                                   "allow_failure": allow_failure})
        return [JobId(i) for i in await self.runtime.aenqueue_jobs(jobs, conn=conn)]


class Enqueuer(Generic[P, R]):
    """A task with enqueue options fixed: ``task.options(delay=5).enqueue(x, y)`` type-checks
    the task's own arguments, and the options are checked once, here."""

    def __init__(self, task: Task[P, R], options: dict[str, Any]) -> None:
        self.task = task
        self._options = {k: v for k, v in options.items() if v is not None}

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R]:
        return self.task.enqueue_with(args, kwargs, **self._options)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R]:
        options = dict(self._options)
        conn = options.pop("conn", None)
        job = self.task.new_job(args, kwargs, **options)
        return JobId((await self.task.runtime.aenqueue_jobs([job], conn=conn))[0])


class Options(Generic[P, R]):
    """``task.options``: the task's settings as attributes, and a call that makes an
    :class:`Enqueuer` with enqueue options."""

    def __init__(self, task: Task[P, R]) -> None:
        self._task = task
        opts = task.config
        self.name, self.queue, self.priority = opts.name, opts.queue, opts.priority
        self.max_attempts, self.max_stalls = opts.max_attempts, opts.max_stalls
        self.timeout: float | None = opts.timeout
        self.retry: Backoff = opts.retry
        #: The fleet-wide limit (concurrency, rate, limit_key), or None.
        self.flow: FlowLimit | None = opts.flow
        self.limit_key: str | None = opts.limit_key

    def __call__(
        self,
        *,
        delay: float | None = None,
        run_at: float | datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        queue: str | None = None,
        conn: Any = None,
        limit_key: str | int | None = None,
        after: After = None,
        allow_failure: bool | None = None,
    ) -> Enqueuer[P, R]:
        return Enqueuer(self._task, {"delay": delay, "run_at": run_at, "priority": priority,
                                     "unique_key": unique_key, "queue": queue, "conn": conn,
                                     "limit_key": limit_key, "after": after,
                                     "allow_failure": allow_failure})
