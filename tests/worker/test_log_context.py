"""Log records emitted inside a handler carry the job (issue #24): ``job_id``, ``task``,
``attempt`` and ``queue`` on every record, from any logger, in the thread pool and in a
process-pool child; nothing outside a handler; a caller's own ``extra`` wins."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tether
from tests.worker.helpers import running, status, wait_until
from tests.worker.pool_tasks import register
from tether._logs import JsonFormatter, TextFormatter

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]


class Keep(logging.Handler):
    """Keeps every record it is handed (a real handler on a real logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def user_log() -> Iterator[Keep]:
    keep = Keep()
    logger = logging.getLogger("tests.user")
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    yield keep
    logger.removeHandler(keep)


def test_records_inside_a_handler_carry_the_job(make_app: MakeApp, user_log: Keep) -> None:
    app = make_app()
    logger = logging.getLogger("tests.user")

    @app.task(name="logs.work", queue="mail", max_attempts=3,
              retry=tether.Backoff(base=0.01, factor=1.0, max=0.01, jitter=0.0))
    def work(n: int) -> None:
        logger.info("working on %s", n)
        logger.info("own fields", extra={"queue": "mine", "job_id": "custom"})
        if tether.current_job().attempt == 1:
            raise RuntimeError("first attempt fails")

    logger.info("outside any job")
    job_id = work.enqueue(7)
    with running(app, concurrency=2):
        wait_until(lambda: status(app, job_id) == "done", what="the job done")

    outside = user_log.records[0]
    assert outside.getMessage() == "outside any job"
    assert not hasattr(outside, "job_id") and not hasattr(outside, "task")
    working = [r for r in user_log.records if r.getMessage() == "working on 7"]
    assert [(r.job_id, r.task, r.attempt, r.queue) for r in working] == [  # type: ignore[attr-defined]
        (job_id, "logs.work", 1, "mail"), (job_id, "logs.work", 2, "mail")]
    own = [r for r in user_log.records if r.getMessage() == "own fields"]
    assert own and all(r.queue == "mine" and r.job_id == "custom"  # type: ignore[attr-defined]
                       for r in own)
    assert all(r.task == "logs.work" for r in own)  # type: ignore[attr-defined]

    text = TextFormatter().format(working[0])
    assert f"job_id={job_id}" in text and "task=logs.work" in text and "attempt=1" in text
    assert "queue=mail" in text
    assert "job_id" not in TextFormatter().format(outside)
    data = json.loads(JsonFormatter().format(working[1]))
    assert (data["job_id"], data["task"], data["attempt"], data["queue"]) == (
        job_id, "logs.work", 2, "mail")


def test_user_formatter_reads_the_fields(make_app: MakeApp) -> None:
    app = make_app()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(
        "%(job_id)s %(task)s %(attempt)s %(queue)s %(message)s",
        defaults={"job_id": "-", "task": "-", "attempt": "-", "queue": "-"}))
    logger = logging.getLogger("tests.user.fmt")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    @app.task(name="logs.fmt")
    def fmt() -> None:
        logger.info("inside")

    try:
        logger.info("outside")
        job_id = fmt.enqueue()
        with running(app):
            wait_until(lambda: status(app, job_id) == "done", what="the job done")
    finally:
        logger.removeHandler(handler)
    assert out.getvalue().splitlines() == ["- - - - outside", f"{job_id} logs.fmt 1 default inside"]


def test_process_pool_child_records_carry_the_job(make_app: MakeApp, tmp_path: Path) -> None:
    app = make_app()
    register(app)
    path = tmp_path / "child.jsonl"
    job_id = app.runtime.registry.tasks["pool.logs"].enqueue(str(path))
    with running(app, concurrency=1, pool="process", app_spec="tests.worker.pool_tasks:app"):
        wait_until(lambda: status(app, job_id) == "done", timeout=30, what="the job done")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(d["message"], d["job_id"], d["task"], d["attempt"], d["queue"]) for d in lines] == [
        ("from the child", job_id, "pool.logs", 1, "default")]
