"""The failover watch never takes a claim racing its look for a data loss (found behind
PgBouncer, issue 18 A, where the look's round trip is longer).

A look (``observe``) reads the uid of the newest job this store had claimed when the look
began; a claim on another thread of the same store that lands meanwhile makes a newer job the
newest. Judging the look against that newer job read "another job under its id": a data loss
logged at ERROR and counted, on a healthy server. The look must be judged against what the
store knew when it began.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.crash.harness import wait_for
from tests.pg_template import clone_for_url
from tests.servers import PG_DSN
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore


def test_a_claim_during_a_look_is_no_data_loss(
    pg_url: str, open_pg: Callable[..., PostgresStore], admin: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture
) -> None:
    clone_for_url(pg_url)
    pg = open_pg(min_size=2)  # the claim below needs no new connection (a new one looks too)
    pg.enqueue([NewJob("t", queue="race") for _ in range(2)])
    (first,) = pg.claim("w", ["race"], 1, 30.0)
    with caplog.at_level(logging.WARNING, logger="tether.store.postgres"):
        # Hold the look on the identity row (it plans the whole statement under its lock).
        with psycopg.connect(PG_DSN) as locker:  # a transaction of its own, until the end
            locker.execute(f'LOCK TABLE "{pg.schema}".identity IN ACCESS EXCLUSIVE MODE')
            pg._watch.soon()
            looking = threading.Thread(target=pg.get_job, args=(first.id,))
            looking.start()
            wait_for(lambda: admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event_type = 'Lock'", (pg.application_name,)).fetchone() == (1,),
                10, "the look to wait on the identity row's lock")
            (second,) = pg.claim("w", ["race"], 1, 30.0)  # the newest claimed job now
            assert second.id > first.id
            locker.rollback()
        looking.join(10)
    assert not looking.is_alive()
    assert pg._watch.noticed == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
