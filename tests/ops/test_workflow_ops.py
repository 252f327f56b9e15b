"""Workflows where operators look (issue #20): ``tether job`` shows parents, children and
``waiting_on``; ``tether jobs --status waiting``; ``tether enqueue --after``; ``waiting`` in
stats, purge and the dashboard, whose job page lists the links and draws the workflow graph."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pytest

from tether._cli.main import main
from tether._task import make_new_job
from tether.stores import Outcome, Store, open_store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    s.migrate()
    try:
        yield s
    finally:
        s.close()


def diamond(store: Store) -> dict[str, int]:
    """a -> (b, c) -> d, a done, b running, c pending; d waits on both (queue wq)."""
    (a,) = store.enqueue([make_new_job("wf.a", [], {}, queue="wq")])
    (job,) = store.claim("w", ["wq"], 1, 30)
    store.finish([Outcome(job.lease, "done", result="1")])
    b, c = store.enqueue([make_new_job("wf.b", [], {}, queue="wq", after=[a]),
                          make_new_job("wf.c", [], {}, queue="wq", after=[a])])
    store.claim("w", ["wq"], 1, 30)
    (d,) = store.enqueue([make_new_job("wf.d", [], {}, queue="wq", after=[b, c],
                                       allow_failure=True)])
    return {"a": a, "b": b, "c": c, "d": d}


def test_job_shows_its_links_and_jobs_lists_the_waiting(
        store: Store, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ids = diamond(store)
    code, out, _ = run(capsys, "job", str(ids["d"]), "--url", store_url)
    assert code == 0
    status = {j.id: j.status for j in store.get_jobs([ids["b"], ids["c"]])}
    assert re.search(rf"parents\s+{ids['b']} \({status[ids['b']]}\), "
                     rf"{ids['c']} \({status[ids['c']]}\)", out), out
    assert re.search(r"waiting_on\s+2 of 2", out) and re.search(r"allow_failure\s+true", out)
    code, out, _ = run(capsys, "job", str(ids["a"]), "--url", store_url)
    assert re.search(rf"children\s+{ids['b']} \(\w+\), {ids['c']} \(\w+\)", out), out
    assert "waiting_on" not in out
    code, out, _ = run(capsys, "job", str(ids["d"]), "--url", store_url, "--json")
    data = json.loads(out)
    assert (data["status"], data["parents"], data["children"], data["waiting_on"],
            data["allow_failure"]) == ("waiting", [ids["b"], ids["c"]], [], 2, True)
    code, out, _ = run(capsys, "jobs", "--status", "waiting", "--url", store_url, "--json")
    assert [j["id"] for j in json.loads(out)] == [ids["d"]]
    code, out, _ = run(capsys, "stats", "--url", store_url, "--json")
    assert json.loads(out)["queues"]["wq"]["waiting"] == 1
    code, out, _ = run(capsys, "stats", "--url", store_url)
    assert "WAITING" in out


def test_enqueue_after_and_purge_waiting(
        store: Store, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    (parent,) = store.enqueue([make_new_job("wf.p", [], {}, queue="pq")])
    code, out, err = run(capsys, "enqueue", "wf.child", "--url", store_url, "--queue", "pq",
                         "--after", str(parent), "--after", str(parent), "--allow-failure")
    assert code == 0, err
    child = int(out)
    links = store.job_links(child)
    assert (links.parents, links.waiting_on, links.allow_failure) == ((parent,), 1, True)
    code, _, err = run(capsys, "enqueue", "wf.child", "--url", store_url, "--after", "999999")
    assert code == 4 and "999999" in err, "an unknown parent is refused (not found)"
    code, out, _ = run(capsys, "purge", "pq", "--url", store_url, "--status", "waiting", "--yes")
    assert code == 0 and "deleted 1" in out
    assert store.get_job(child) is None


def test_the_dashboard_job_page_lists_links_and_draws_the_graph(
        store: Store, store_url: str) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from tether.dashboard._app import create_app

    ids = diamond(store)
    (lone,) = store.enqueue([make_new_job("wf.lone", [], {}, queue="wq")])
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        page = html.unescape(c.get(f"/jobs/{ids['d']}").text)
        assert 'id="parents"' in page and f'href="/jobs/{ids["b"]}"' in page
        assert "waiting on 2 of 2" in page and 'http-equiv="refresh"' in page
        assert 'id="cancel"' in page, "a waiting job can be cancelled"
        svg = page[page.index("<svg"):page.index("</svg>")]
        for name, job_id in ids.items():
            assert f'id="node-{job_id}"' in svg, name
        statuses = dict(re.findall(r'id="node-(\d+)" data-status="(\w+)"', svg))
        assert statuses[str(ids["a"])] == "done" and statuses[str(ids["d"])] == "waiting"
        assert len(re.findall(r'class="edge"', svg)) == 4
        assert 'class="node waiting me"' in svg
        page = c.get(f"/jobs/{ids['a']}").text
        assert 'id="children"' in page and "<svg" in page
        assert "<svg" not in c.get(f"/jobs/{lone}").text, "no graph for a job without links"
        overview = c.get("/").text
        assert "waiting" in overview


def test_the_graph_is_cut_at_200_jobs(store: Store, store_url: str) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from tether.dashboard._app import create_app
    from tether.dashboard._graph import MAX_JOBS

    (root,) = store.enqueue([make_new_job("wf.root", [], {}, queue="fan")])
    store.enqueue([make_new_job("wf.leaf", [i], {}, queue="fan", after=[root])
                   for i in range(MAX_JOBS + 50)])
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        page = c.get(f"/jobs/{root}").text
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert svg.count('class="node') == MAX_JOBS
    assert f"the {MAX_JOBS} jobs nearest this one" in page
    assert "and 200 more" in page, "the children list stops at 50"
