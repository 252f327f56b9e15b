"""Every bad input: one line on stderr, the documented exit code, never a traceback.

Run as real subprocesses, as a user would meet them (exit codes: 1 ran but failed, 2 bad usage
or configuration, 3 store unreachable or schema missing, 4 not found)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ops.conftest import ROOT, run_cli
from tests.servers import require_server
from tether._task import make_new_job
from tether.stores import open_store

APP = "tests.ops.apps:app"
CASES: list[tuple[int, list[str]]] = [
    (2, ["worker", APP, "-c", "0"]),
    (2, ["worker", APP, "-c", "x"]),
    (2, ["worker", APP, "--metrics-port", "0"]),
    (2, ["worker", APP, "-q", ""]),
    (2, ["worker"]),
    (2, ["worker", "no_such_module_xyz:app"]),
    (2, ["worker", "tether:App"]),
    (2, ["--log-level", "FOO", "stats"]),
    (2, ["stats", "--log-level", "FOO"]),
    (2, ["stats", "--log-format", "xml"]),
    (2, ["enqueue", "t", "--args", "[NaN]"]),
    (2, ["enqueue", "t", "--args", '{"x": Infinity}']),
    (2, ["enqueue", "t", "--args", "{nope"]),
    (2, ["enqueue", "t", "--args", "3"]),
    (2, ["enqueue", "t", "--delay", "-1"]),
    (2, ["enqueue", "t", "--delay", "nan"]),
    (2, ["enqueue", "t", "--queue", ""]),
    (2, ["enqueue", ""]),
    (2, ["enqueue", "t", "--max-attempts", "0"]),
    (2, ["enqueue", "t", "--priority", "99999999999"]),
    (2, ["enqueue", "t", "--unique-key", "a\x01" + "b" * 600]),
    (2, ["enqueue", "--app", APP, "no.such.task"]),
    (2, ["job", "99999999999999999999"]),
    (2, ["job", "0"]),
    (2, ["job", "abc"]),
    (2, ["cancel", "-5"]),
    (2, ["jobs", "--limit", "0"]),
    (2, ["jobs", "--limit", "-1"]),
    (2, ["jobs", "--since", "yesterday"]),
    (2, ["jobs", "--status", "weird"]),
    (2, ["purge", "q", "--status", "running"]),
    (2, ["dashboard", "--port", "70000"]),
    (2, ["dashboard", "--host", "0.0.0.0"]),
    (2, ["stats", "--url", "redis://127.0.0.1:6379/0?socket_timeout=foo"]),
    (2, ["stats", "--url", "redis://127.0.0.1:99999/0"]),
    (2, ["stats", "--url", "redis://127.0.0.1:6379/0?prefix=a b"]),
    (2, ["stats", "--url", "mysql://localhost/x"]),
    (2, ["stats", "--url", "sqlite://host/x.db"]),
    (2, ["stats", "--app", "nope"]),
    (2, ["nosuchcommand"]),
    (2, []),
    (3, ["stats", "--url", "postgresql://postgres@127.0.0.1:1/test"]),
    (3, ["stats", "--url", "redis://127.0.0.1:1/0"]),
    (3, ["jobs", "--url", "sqlite:///{tmp}/missing.db"]),
    (4, ["dlq", "retry", "9999", "--url", "{url}"]),
    (4, ["job", "9999", "--url", "{url}"]),
    (4, ["cancel", "9999", "--url", "{url}"]),
    (1, ["health", "--worker", "--queue", "nobody", "--url", "{url}"]),
]


# One test process for the module: its module-scoped fixture is built once, not once per
# process.
pytestmark = pytest.mark.xdist_group("ops-bad-input")


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('bad') / 'x.db'}"
    store = open_store(url)
    store.migrate()
    store.close()
    return url


@pytest.mark.parametrize(("code", "argv"), CASES, ids=lambda v: " ".join(v)[:60]
                         if isinstance(v, list) else str(v))
def test_bad_input(code: int, argv: list[str], migrated: str, tmp_path: Path) -> None:
    if any("redis://127.0.0.1:6379" in a for a in argv):
        require_server("redis")
    argv = [a.replace("{url}", migrated).replace("{tmp}", str(tmp_path)) for a in argv]
    result = run_cli(*argv, env={"TETHER_URL": f"sqlite:///{tmp_path / 'default.db'}"})
    err = result.stderr.strip()
    assert result.returncode == code, (argv, result.stdout, err)
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "default.db").exists() or (argv and argv[0] == "enqueue")


def test_output_piped_into_head_is_not_an_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pipe.db'}"
    store = open_store(url)
    store.migrate()
    store.enqueue([make_new_job("t", [i], {}) for i in range(3000)])
    store.close()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with subprocess.Popen([sys.executable, "-m", "tether", "jobs", "--url", url, "--limit",
                           "3000", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # like `| head -1`
        err = proc.stderr.read().decode()
        code = proc.wait(60)
    assert code == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
