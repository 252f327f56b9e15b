"""The ``tether`` command: tables, --json, exit codes, one clear line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tether._cli.main import main
from tether._task import make_new_job
from tether.stores import Outcome, open_store

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def url(store_url: str) -> str:
    return store_url


def test_enqueue_jobs_job_stats(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "enqueue", "mail.send", "--url", url, "--args", '["a@b.c"]',
                       "--queue", "mail")
    assert code == 0
    job_id = int(out.strip())
    code, out, _ = run(capsys, "enqueue", "mail.send", "--url", url, "--json", "--args",
                       '{"to": "x"}', "--queue", "mail")
    assert code == 0 and json.loads(out)["id"] == job_id + 1
    code, out, _ = run(capsys, "jobs", "--url", url)
    assert code == 0 and "mail.send" in out and "pending" in out and "ID" in out
    code, out, _ = run(capsys, "jobs", "--url", url, "--json", "--limit", "1")
    data = json.loads(out)  # newest first
    assert [j["id"] for j in data] == [job_id + 1] and data[0]["kwargs"] == {"to": "x"}
    code, out, _ = run(capsys, "jobs", "--url", url, "--json", "--before", str(job_id + 1))
    data = json.loads(out)
    assert [j["id"] for j in data] == [job_id] and data[0]["args"] == ["a@b.c"]
    assert data[0]["created_at"].endswith("+00:00")
    code, out, _ = run(capsys, "jobs", "--url", url, "--json", "--after", str(job_id))
    assert [j["id"] for j in json.loads(out)] == [job_id + 1]
    code, out, _ = run(capsys, "job", str(job_id), "--url", url)
    assert code == 0 and "status" in out and "pending" in out
    code, out, _ = run(capsys, "stats", "--url", url, "--json")
    stats = json.loads(out)
    assert stats["queues"]["mail"]["pending"] == 2
    if url.startswith("redis"):  # the test server runs without persistence, on purpose
        assert any("appendonly" in w for w in stats["warnings"])
    code, out, _ = run(capsys, "stats", "--url", url)
    assert code == 0 and "mail" in out and "PENDING" in out


def test_dlq_list_and_retry(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(url)
    store.migrate()
    try:
        ids = store.enqueue([make_new_job("t", [], {}, max_attempts=1) for _ in range(3)])
        for job in store.claim("w", ["default"], 3, 30):
            store.finish([Outcome(job.lease, "error", error="boom", reason="error")])
        code, out, _ = run(capsys, "dlq", "list", "--url", url)
        assert code == 0 and out.count("boom") == 3
        code, out, _ = run(capsys, "dlq", "retry", str(ids[0]), "--url", url)
        assert code == 0 and "retried 1" in out
        assert store.get_job(ids[0]).status == "pending"  # type: ignore[union-attr]
        code, out, _ = run(capsys, "dlq", "retry", "--all", "--url", url, "--json")
        assert json.loads(out) == {"retried": 2, "conflicts": [], "missing": []}
        code, _, err = run(capsys, "dlq", "retry", "--url", url)
        assert code == 2 and "--all" in err
    finally:
        store.close()


def test_bad_input_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    code, _, err = run(capsys, "job", "999", "--url", url)
    assert code == 3 and "no SQLite store" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()  # a read command creates nothing
    run(capsys, "migrate", "--url", url)
    code, _, err = run(capsys, "job", "999", "--url", url)
    assert code == 4 and err.strip() == "tether: no job with id 999"
    code, _, err = run(capsys, "enqueue", "t", "--url", url, "--args", "{nope")
    assert code == 2 and "not JSON" in err
    code, _, err = run(capsys, "enqueue", "t", "--url", url, "--args", "3")
    assert code == 2
    code, _, err = run(capsys, "jobs", "--url", "mysql://localhost/x")
    assert code == 2 and "unknown store URL" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "worker", "no_such_module_xyz:app")
    assert code == 2 and "cannot import" in err


def test_unreachable_postgres_is_one_line_and_exit_3() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tether._cli.main", "stats", "--url",
         "postgresql://postgres@127.0.0.1:1/test"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 3, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_every_command() -> None:
    result = subprocess.run([sys.executable, "-m", "tether._cli.main", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    for command in ("worker", "reaper", "enqueue", "jobs", "job", "dlq", "stats", "migrate",
                    "demo", "server"):
        assert command in result.stdout


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(120)
def test_demo_holds_every_invariant(tmp_path: Path) -> None:
    """The README's main job: three real workers, a SIGKILL and a SIGSTOP, nothing lost."""
    result = subprocess.run(
        [sys.executable, "-m", "tether._cli.main", "demo", "--jobs", "80", "--lease-ttl", "2"],
        capture_output=True, text=True, timeout=110, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every invariant held" in result.stdout
    assert "FAILED" not in result.stdout
    assert "stale write was rejected" in result.stdout
