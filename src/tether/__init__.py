"""Tether: a crash-safe background job queue.

A job held by a worker that dies is recovered within ``lease_ttl + stall_grace + 2 s``, and a
worker that lost its claim can never again change that job. See docs/guarantees.md.
"""

from tether._app import App
from tether._backoff import Backoff
from tether._canvas import Signature, WorkflowIds, chain, chord, group
from tether._codec import Codec, JSONCodec
from tether._context import JobContext, current_job
from tether._errors import (
    AuthError,
    ConfigError,
    Fail,
    Interrupted,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobWasCancelled,
    LeaseInterrupted,
    LeaseLost,
    ResultNotDecodable,
    Retry,
    SchemaError,
    ShuttingDown,
    Snooze,
    StoreError,
    StoreFull,
    StoreGone,
    StoreUnavailable,
    TetherError,
)
from tether._events import Event
from tether._jobid import JobId
from tether._jobview import Job
from tether._task import Task
from tether._version import __version__

__all__ = [
    "App",
    "AuthError",
    "Backoff",
    "Codec",
    "ConfigError",
    "Event",
    "Fail",
    "Interrupted",
    "JSONCodec",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobId",
    "JobNotFound",
    "JobWasCancelled",
    "LeaseInterrupted",
    "LeaseLost",
    "ResultNotDecodable",
    "Retry",
    "SchemaError",
    "ShuttingDown",
    "Signature",
    "Snooze",
    "StoreError",
    "StoreFull",
    "StoreGone",
    "StoreUnavailable",
    "Task",
    "TetherError",
    "WorkflowIds",
    "__version__",
    "chain",
    "chord",
    "current_job",
    "group",
]

# One public face (as httpx does): the public names say they come from ``tether``, not from the
# private module that happens to hold them, in reprs, tracebacks, pickles and the docs.
for _name in __all__:
    if not _name.startswith("__"):
        try:
            globals()[_name].__module__ = "tether"
        except (AttributeError, TypeError):  # pragma: no cover - not a class or function
            pass
del _name
