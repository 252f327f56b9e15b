"""Tether: a crash-safe background job queue.

A job held by a worker that dies is recovered within ``lease_ttl + stall_grace + 2 s``, and a
worker that lost its claim can never again change that job. See docs/guarantees.md.
"""

from tether.app import App
from tether.backoff import Backoff
from tether.context import JobContext, current_job
from tether.errors import (
    ConfigError,
    Fail,
    Interrupted,
    JobCancelled,
    JobNotFound,
    LeaseInterrupted,
    LeaseLost,
    Retry,
    SchemaError,
    ShuttingDown,
    StoreError,
    StoreGone,
    StoreUnavailable,
    TetherError,
)
from tether.events import Event
from tether.stores.base import Job
from tether.task import Task

__version__ = "0.1.0"

__all__ = [
    "App",
    "Backoff",
    "ConfigError",
    "Event",
    "Fail",
    "Interrupted",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobNotFound",
    "LeaseInterrupted",
    "LeaseLost",
    "Retry",
    "SchemaError",
    "ShuttingDown",
    "StoreError",
    "StoreGone",
    "StoreUnavailable",
    "Task",
    "TetherError",
    "__version__",
    "current_job",
]
