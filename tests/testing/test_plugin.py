"""The pytest plugin (``tether.testing.plugin``, entry point ``pytest11: tether``), run the way
users run it: a pytest session in a temporary project with its own app module."""

from __future__ import annotations

import importlib.metadata
import uuid

import pytest

pytest_plugins = ["pytester"]

APP = '''
import tether

app = tether.App("sqlite:///must-never-be-created.db")


@app.task(name="jobs.add")
def add(a: int, b: int) -> int:
    return a + b


@app.task(name="jobs.chain")
def chain(n: int) -> int:
    if n > 0:
        chain.enqueue(n - 1)
    return n


@app.task(name="jobs.boom", max_attempts=3, retry=tether.Backoff(base=30))
def boom() -> None:
    raise ValueError("boom at attempt %d" % tether.current_job().attempt)
'''

TESTS = '''
import pytest
from tether.testing import DrainFailed, drain

import jobs


def test_the_fixture_is_the_users_app_on_a_fresh_store(tether_app):
    assert tether_app is jobs.app
    assert tether_app.runtime.url.startswith("{scheme}")
    assert tether_app.store.list_jobs() == []
    jobs.add.enqueue(1, 2)
    assert len(tether_app.store.list_jobs()) == 1


def test_each_test_gets_its_own_store(tether_app):
    assert tether_app.store.list_jobs() == [], "nothing left over from the other test"


def test_drain_runs_the_tasks(tether_app):
    job_id = jobs.chain.enqueue(3)
    ran = drain(tether_app)
    assert [j.id for j in ran][0] == job_id
    assert [j.result_value for j in ran] == [3, 2, 1, 0]
    assert {{j.status for j in ran}} == {{"done"}}


def test_the_drain_fixture_and_failures(tether_app, tether_drain):
    jobs.boom.enqueue()
    with pytest.raises(DrainFailed, match="boom at attempt"):
        tether_drain(raise_on_failure=True{ff})
'''


def _project(pytester: pytest.Pytester, scheme: str, ff: str = "") -> None:
    pytester.makepyfile(jobs=APP, test_user=TESTS.format(scheme=scheme, ff=ff))
    pytester.syspathinsert()


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="pytest11")
             if ep.name == "tether"]
    assert [ep.value for ep in found] == ["tether.testing.plugin"]


def test_the_app_from_the_ini_option_on_memory(pytester: pytest.Pytester) -> None:
    _project(pytester, "memory://")
    pytester.makeini("[pytest]\ntether_app = jobs:app\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert not (pytester.path / "must-never-be-created.db").exists()


def test_the_app_from_the_command_line_on_sqlite(pytester: pytest.Pytester) -> None:
    _project(pytester, "sqlite:///", ff=", fast_forward=False")
    result = pytester.runpytest("-p", "no:cacheprovider", "--tether-app", "jobs:app",
                                "--tether-store", "sqlite")
    result.assert_outcomes(passed=4)
    assert not (pytester.path / "must-never-be-created.db").exists()


def test_the_app_fixture_can_be_overridden(pytester: pytest.Pytester) -> None:
    _project(pytester, "memory://")
    pytester.makeconftest('''
import pytest
import jobs

@pytest.fixture
def tether_base_app():
    return jobs.app
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_the_url_is_restored_after_the_test(pytester: pytest.Pytester) -> None:
    _project(pytester, "memory://")
    pytester.makepyfile(test_after='''
import jobs

def test_z_after(tether_app):
    pass

def test_zz_restored():
    assert jobs.app.runtime.url == "sqlite:///must-never-be-created.db"
''')
    result = pytester.runpytest("-p", "no:cacheprovider", "--tether-app", "jobs:app")
    result.assert_outcomes(passed=6)


def test_without_an_app_the_fixture_says_how_to_give_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_none="def test_it(tether_app):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*tether_app = module:app*--tether-app*"])


def test_an_app_that_does_not_migrate_gets_a_migrated_store(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(strict_app='''
import tether

app = tether.App("sqlite:///never.db", auto_migrate=False)


@app.task(name="t")
def t() -> int:
    return 1
''', test_strict='''
from tether.testing import drain

import strict_app


def test_it(tether_app):
    strict_app.t.enqueue()
    tether_app.close()  # the data stays: the fixture holds the store open
    [job] = drain(tether_app)
    assert job.result == 1
''')
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider", "--tether-app", "strict_app:app")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_the_fresh_store_on_a_postgresql_or_redis_server(
    pytester: pytest.Pytester, kind: str
) -> None:
    """``--tether-store URL``: each test a schema (PostgreSQL) / key prefix (Redis) of its own
    on that server, removed after the test; the URL's own schema / prefix is never used."""
    from tests.servers import PG_DSN, REDIS_URL, require_server

    require_server(kind)
    tag = "keep" + uuid.uuid4().hex[:10]
    if kind == "postgres":
        server, scheme = f"{PG_DSN}?schema={tag}", "postgresql://"
    else:
        server, scheme = f"{REDIS_URL}?prefix={tag}", "redis://"
    before = _server_names(kind)
    _project(pytester, scheme, ff=", fast_forward=False")
    pytester.makepyfile(test_names=f'''
def test_not_the_servers_own_name(tether_app):
    assert "{tag}" not in tether_app.runtime.url and "tether_test_" in tether_app.runtime.url
''')
    result = pytester.runpytest("-p", "no:cacheprovider", "--tether-app", "jobs:app",
                                "--tether-store", server)
    result.assert_outcomes(passed=5)
    assert not (pytester.path / "must-never-be-created.db").exists()
    assert _server_names(kind) - before == set(), "every test's schema / keys were removed"


def _server_names(kind: str) -> set[str]:
    """The fresh stores' names the server holds: PostgreSQL schemas, Redis key prefixes."""
    from tests.servers import PG_DSN, REDIS_URL

    if kind == "postgres":
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace "
                                "WHERE nspname LIKE 'tether_test_%'").fetchall()
        return {str(r[0]) for r in rows}
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        return {k.decode().split(":", 1)[0] for k in client.scan_iter(match="tether_test_*")}
    finally:
        client.close()


def test_a_wrong_store_choice_is_one_clear_error(pytester: pytest.Pytester) -> None:
    _project(pytester, "memory://")
    result = pytester.runpytest("-p", "no:cacheprovider", "--tether-app", "jobs:app",
                                "--tether-store", "mysql://h/db")
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines(["*tether_store must be memory, sqlite, or a postgresql://*"])
