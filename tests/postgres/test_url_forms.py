"""Every libpq URI form psql accepts opens the store and runs a job; tether's own parameters
are taken out and libpq's reach it (issue 18 F)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

import tether
from tests.servers import PG_DSN
from tether.stores._postgres.url import split_url
from tether.testing import drain


def socket_dir() -> str:
    """The test server's first unix socket directory (``SHOW unix_socket_directories``)."""
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute("SHOW unix_socket_directories").fetchone()
    dirs = [d.strip() for d in (row[0] if row else "").split(",") if d.strip()]
    if not dirs or dirs[0].startswith("@"):
        pytest.skip("the test server listens on no unix socket directory")
    return dirs[0]


@pytest.fixture
def schema(pg_url: str) -> str:
    return parse_qs(urlsplit(pg_url).query)["schema"][0]


FORMS = {
    "empty host, socket in host=": "postgresql:///test?host={sock}&port=5432&user=postgres"
                                   "&schema={schema}",
    "percent-encoded socket host": "postgresql://postgres@{sock_enc}:5432/test?schema={schema}",
    "postgres scheme": "postgres://postgres@127.0.0.1:5432/test?schema={schema}",
    "multi-host, first refuses": "postgresql://postgres@127.0.0.1:1,127.0.0.1:5432/test"
                                 "?schema={schema}&connect_timeout=2",
    "IPv6 and IPv4 hosts": "postgresql://postgres@[::1]:1,127.0.0.1:5432/test"
                           "?schema={schema}&target_session_attrs=read-write",
    "libpq parameters kept": "postgresql://postgres@127.0.0.1/test?sslmode=disable"
                             "&schema={schema}&application_name=forms&keepalives=1",
    "no database in the path": "postgresql://postgres@127.0.0.1:5432?dbname=test"
                               "&schema={schema}",
}


@pytest.fixture(params=sorted(FORMS))
def form(request: pytest.FixtureRequest, schema: str) -> Iterator[str]:
    sock = socket_dir() if "sock" in FORMS[request.param] else ""
    yield FORMS[request.param].format(sock=sock, sock_enc=sock.replace("/", "%2F"),
                                      schema=schema)


def test_every_libpq_uri_form_runs_a_job(form: str) -> None:
    app = tether.App(form)

    @app.task(name="forms.add")
    def add(a: int, b: int) -> int:
        return a + b

    try:
        job = add.enqueue(2, 3)
        ran = drain(app)
        assert [j.id for j in ran] == [job]
        assert app.get_job(job).result_value == 5
    finally:
        app.close()


def test_tether_parameters_are_taken_out_and_the_rest_kept() -> None:
    dsn, schema = split_url("postgresql:///db?host=/s/d&schema=abc&port=5441&user=pg")
    assert (dsn, schema) == ("postgresql:///db?host=/s/d&port=5441&user=pg", "abc")
    dsn, schema = split_url("postgres://[::1]:5,h2:6/db?options=-c%20a%3Db&schema=s")
    assert (dsn, schema) == ("postgres://[::1]:5,h2:6/db?options=-c%20a%3Db", "s")
    assert split_url("postgresql:///db?schema=s") == ("postgresql:///db", "s")
    assert split_url("postgresql://?schema=s&host=h") == ("postgresql://?host=h", "s")
