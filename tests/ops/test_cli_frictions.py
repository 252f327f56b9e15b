"""Issue #24's smaller frictions: purge shows and asks before it deletes, pause warns about
a queue nothing uses, ``--help`` names each default once, ``--follow`` prints a line only
when what it shows changes."""

from __future__ import annotations

import argparse
import io
import json
import threading
from typing import Any

import pytest

from tests.worker.helpers import wait_until
from tether._cli.live import follow
from tether._cli.main import build_parser, main
from tether._task import make_new_job
from tether.stores import Outcome, WorkerInfo, open_store
from tether.stores._contract import Store


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(store_url: str) -> Any:
    s = open_store(store_url)
    s.migrate()
    yield s
    s.close()


def test_purge_shows_and_asks_first(store: Store, store_url: str,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store.enqueue([make_new_job("t", [i], {}, queue="pq", max_attempts=1) for i in range(3)])
    (job,) = store.claim("w", ["pq"], 1, 30)
    store.finish([Outcome(job.lease, "error", reason="error", error="x")])
    base = ("purge", "pq", "--url", store_url, "--status", "pending", "--status", "cancelled")

    code, out, err = run(capsys, *base)  # not a terminal (pytest's stdin): show, refuse
    assert code == 2 and "queue pq: 2 pending, 0 cancelled job(s) would be deleted" in out
    assert "add --yes" in err
    assert run(capsys, *base, "--dry-run")[0] == 0
    code, out, _ = run(capsys, *base, "--json")
    assert code == 2 and json.loads(out)["would_delete"] == {"pending": 2, "cancelled": 0}

    monkeypatch.setattr("sys.stdin", _Tty("n\n"))
    code, out, _ = run(capsys, *base)
    assert code == 1 and "nothing deleted" in out
    assert sum(c.count for c in store.counts() if c.queue == "pq" and c.status == "pending") == 2
    monkeypatch.setattr("sys.stdin", _Tty("y\n"))
    code, out, _ = run(capsys, *base)
    assert code == 0 and "deleted 2 pending/cancelled job(s) from queue pq" in out
    code, out, _ = run(capsys, "purge", "pq", "--url", store_url, "--status", "failed", "--yes")
    assert code == 0 and "deleted 1 failed" in out
    code, out, _ = run(capsys, *base)
    assert code == 0 and "nothing to delete" in out
    assert store.counts() == [] or all(c.queue != "pq" for c in store.counts())


class _Tty(io.StringIO):
    """A terminal's stdin with a typed answer (input() reads it)."""

    def isatty(self) -> bool:
        return True


def test_pause_warns_about_a_queue_nothing_uses(store: Store, store_url: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    store.enqueue([make_new_job("t", [], {}, queue="jobs-here")])
    store.register_worker(WorkerInfo(id="w1", host="h", pid=1, queues=("served",),
                                     concurrency=1))
    for queue in ("jobs-here", "served"):
        code, out, err = run(capsys, "pause", queue, "--url", store_url)
        assert code == 0 and f"queue {queue} paused" in out and "warning" not in err
    code, out, err = run(capsys, "pause", "mial", "--url", store_url)
    assert code == 0 and "queue mial paused" in out
    assert "warning: no job, worker or task uses queue 'mial'" in err
    assert "mial" in store.paused_queues()


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.values())
    return found


def test_help_names_each_default_once() -> None:
    for parser in _subparsers(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            text = formatter._expand_help(action) if action.help else ""
            assert text.count("default:") <= 1, (parser.prog, action.dest, text)
            assert "(default: None)" not in text and "(default: False)" not in text


def test_follow_prints_only_changes(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    (job_id,) = store.enqueue([make_new_job("t", [], {})])
    (job,) = store.claim("w", ["default"], 1, 30)
    polls = [0]

    class Counting:
        """The real store; counts the follower's reads so the test knows it looked."""

        def get_job(self, jid: int) -> Any:
            polls[0] += 1
            return store.get_job(jid)

    def seen() -> None:
        start = polls[0]
        wait_until(lambda: polls[0] >= start + 2, what="the follower to read the job again")

    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(
        follow(Counting(), job, False, 0.005)), daemon=True)  # type: ignore[arg-type]
    thread.start()
    seen()
    for n in range(3):  # checkpoints and renewals: nothing the text line shows
        assert store.save_checkpoint(job.lease, f'"{n}"')
        store.heartbeat("w", [job.lease], 30)
        seen()
    assert store.set_progress(job.lease, '"half"')
    seen()
    store.finish([Outcome(job.lease, "done", result="1")])
    thread.join(10)
    assert codes == [0]
    lines = [line.split("  ", 1)[1] for line in capsys.readouterr().out.splitlines()
             if "  job " in line]
    assert lines == [f"job {job_id} running attempt 1/5 on w",
                     f'job {job_id} running attempt 1/5 on w progress "half"',
                     f'job {job_id} done attempt 1/5 progress "half"'], lines
