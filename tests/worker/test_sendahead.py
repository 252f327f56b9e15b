"""The send-ahead policy of the process pool (``sendahead.Ahead``), without processes: nothing
goes ahead behind a task with no duration history, a slow one, or one that crashed its child
lately (issue 18 E: a crash-looping task used to be treated as quick for ever)."""

from __future__ import annotations

import types
from collections import Counter
from typing import Any

from tether._worker.processes import sendahead
from tether._worker.processes.children import State
from tether._worker.processes.sendahead import Ahead


def entry(task: str) -> Any:
    return types.SimpleNamespace(ctx=types.SimpleNamespace(task=task))


def child(running: str | None, started_at: float = 0.0, *ahead: str) -> Any:
    return types.SimpleNamespace(
        entry=entry(running) if running else None, started_at=started_at,
        ahead=[entry(t) for t in ahead], ahead_tasks=Counter(ahead), state=State.BUSY,
        stop_why=None)


def test_only_tasks_known_quick_and_not_crashed_lately_are_queued_behind() -> None:
    ahead = Ahead(types.SimpleNamespace(children=[]), None)  # type: ignore[arg-type]
    assert not ahead.quick("new", 0.0), "no duration history: not known to be quick"
    assert not ahead.may_queue_behind(child("new"), 0.0)
    ahead.learn("quick", 0.001)
    ahead.learn("slow", 1.0)
    assert ahead.quick("quick", 0.0) and not ahead.quick("slow", 0.0)
    assert ahead.may_queue_behind(child("quick", 0.0, "quick"), 0.1)
    assert not ahead.may_queue_behind(child("quick", 0.0, "quick", "slow"), 0.1)
    assert not ahead.may_queue_behind(child("quick", 0.0), sendahead.PATIENCE)
    ahead.crash("quick", 10.0)
    assert not ahead.quick("quick", 10.0 + sendahead.CRASH_MEMORY - 1)
    assert not ahead.may_queue_behind(child("quick", 10.0), 10.1)
    assert ahead.quick("quick", 10.0 + sendahead.CRASH_MEMORY)


def test_a_waiting_job_goes_back_only_when_no_child_will_be_free_soon() -> None:
    busy_long = child("slow", 0.0)
    fleet = types.SimpleNamespace(children=[busy_long])
    ahead = Ahead(fleet, None)  # type: ignore[arg-type]
    assert not ahead.soon_free(sendahead.PATIENCE)
    assert ahead.soon_free(sendahead.PATIENCE / 2), "its handler may end soon"
    starting = child(None)
    starting.state = State.STARTING
    fleet.children.append(starting)
    assert ahead.soon_free(sendahead.PATIENCE), "a replacement child is starting"
