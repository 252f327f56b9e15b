"""``tether server`` as a real process: what it refuses (one line, exit 2, before anything
opens), its start line, SIGHUP and SIGTERM (issue #21)."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

import tether
from tests.crash.harness import wait_for
from tests.server.serving import run_cli, tether_server
from tether._server.auth import fingerprint

WORKER_TOKEN = "w-test-0123456789abcdef"
ADMIN_TOKEN = "a-test-0123456789abcdef"


def token_file(tmp_path: Path, text: str | None = None) -> str:
    path = tmp_path / "tokens"
    path.write_text(text if text is not None else
                    f"{WORKER_TOKEN} worker\n{ADMIN_TOKEN} admin\n")
    path.chmod(0o600)
    return str(path)


def refused(tmp_path: Path, *argv: str) -> str:
    result = run_cli(["server", *argv], tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize(("argv", "says"), [
    (["--listen", "0.0.0.0:0", "--insecure"], "--insecure only listens on a loopback address"),
    (["--listen", "[::]:0", "--insecure"], "not ::"),
    (["--listen", "127.0.0.1:0"], "tether server needs --token-file FILE"),
    (["--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
    (["--listen", "127.0.0.1:0", "--insecure", "--token-file", "x"], "exclude each other"),
    (["--listen", "127.0.0.1:0", "--insecure", "--tls-cert", "c"], "go together"),
    (["--listen", "127.0.0.1:0", "--token-file", "/no/such/tokens"],
     "cannot read the token file /no/such/tokens"),
])
def test_refusals_are_one_line_and_exit_2(tmp_path: Path, argv: list[str], says: str) -> None:
    assert says in refused(tmp_path, *argv)


def test_a_bad_token_file_is_named_by_line_never_by_token(tmp_path: Path) -> None:
    path = token_file(tmp_path, f"{WORKER_TOKEN} worker\n{ADMIN_TOKEN} superuser\n")
    line = refused(tmp_path, "--listen", "127.0.0.1:0", "--token-file", path)
    assert f"{path} line 2: unknown role 'superuser'" in line
    assert WORKER_TOKEN not in line and ADMIN_TOKEN not in line


def test_bad_tls_files_are_refused_before_serving(tmp_path: Path) -> None:
    path = token_file(tmp_path)
    line = refused(tmp_path, "--listen", "127.0.0.1:0", "--token-file", path,
                   "--tls-cert", str(tmp_path / "none.crt"), "--tls-key", path)
    assert "cannot read the TLS certificate" in line and "none.crt" in line


def test_a_tether_url_as_the_store_is_refused_without_its_token(tmp_path: Path) -> None:
    line = refused(tmp_path, "--listen", "127.0.0.1:0", "--insecure", "--url",
                   f"tether://{WORKER_TOKEN}@127.0.0.1:1")
    assert "is a tether server's" in line and "tether://***@127.0.0.1:1" in line
    assert WORKER_TOKEN not in line


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_start_line_sighup_and_sigterm(tmp_path: Path) -> None:
    path = token_file(tmp_path)
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with tether_server(tmp_path, "--url", url, "--token-file", path) as served:
        start = served.wait_line("tether server listening on")
        assert f"127.0.0.1:{served.port} (plaintext)" in start
        assert f"store {url}" in start and "1 worker, 1 admin" in start
        assert "maintenance on (server:" in start
        # SIGHUP: a bad file keeps the old tokens and says which line.
        Path(path).write_text(f"{ADMIN_TOKEN} admin\n{ADMIN_TOKEN} worker\n")
        served.proc.send_signal(signal.SIGHUP)
        bad = served.wait_line("token file not reloaded")
        assert "line 2: the same token as line 1" in bad and "keeping the old tokens" in bad
        Path(path).write_text(f"{ADMIN_TOKEN} admin\n")
        served.proc.send_signal(signal.SIGHUP)
        good = served.wait_line("reloaded (0 worker, 1 admin)")
        assert path in good
        assert served.stop() == 0
        text = served.text()
    assert "stopping" in text
    assert WORKER_TOKEN not in text and ADMIN_TOKEN not in text
    assert fingerprint(WORKER_TOKEN) not in text  # nobody called: no token was even named


REAP_APP = '''
import tether

app = tether.App(URL, lease_ttl=2)
'''


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_server_for_an_app_runs_its_maintenance(tmp_path: Path) -> None:
    """``tether server MODULE:APP``: the app's store URL and settings (lease_ttl) drive the
    server and the reaper it runs."""
    from tether.stores import NewJob, open_store

    url = f"sqlite:///{tmp_path / 'served.db'}"
    (tmp_path / "reap_app.py").write_text(REAP_APP.replace("URL", repr(url)))
    with tether_server(tmp_path, "reap_app:app", "--token-file",
                       token_file(tmp_path)) as served:
        assert f"store {url};" in served.wait_line("tether server listening on")
        store = open_store(url)
        try:
            ids = store.enqueue([NewJob("t")])
            store.claim("dead-worker", ["default"], 1, 1.0)  # nobody will renew it
            wait_for(lambda: (job := store.get_job(ids[0])) is not None
                     and job.status == "pending", 60, "the server's reaper")
        finally:
            store.close()
        assert served.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_insecure_on_loopback_takes_calls_without_a_token(tmp_path: Path) -> None:
    with tether_server(tmp_path, "--insecure", "--no-maintenance", "--url",
                       f"sqlite:///{tmp_path / 'served.db'}") as served:
        start = served.wait_line("tether server listening on")
        assert "no tokens (--insecure" in start and "maintenance off" in start
        result = run_cli(["purge", "default", "--yes", "--url", f"tether://{served.address}"],
                         tmp_path)
        assert result.returncode == 0, result.stderr
        assert served.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_tls_end_to_end(tmp_path: Path) -> None:
    from tests.server.test_tls import make_cert

    cert, key = make_cert(tmp_path)
    with tether_server(tmp_path, "--token-file", token_file(tmp_path), "--tls-cert",
                       str(cert), "--tls-key", str(key), "--url",
                       f"sqlite:///{tmp_path / 'served.db'}") as served:
        assert "(TLS)" in served.wait_line("tether server listening on")
        app = tether.App(f"tethers://{WORKER_TOKEN}@{served.address}?ca={cert}")
        try:
            job = app.enqueue("remote.anything")
            record = app.store.get_job(int(job))
            assert record is not None and record.status == "pending"
        finally:
            app.close()
        assert served.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused(tmp_path, "--listen", f"127.0.0.1:{port}", "--insecure",
                       "--no-maintenance", "--url", f"sqlite:///{tmp_path / 'served.db'}")
    assert f"cannot listen on 127.0.0.1:{port}" in line


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_start_line_redacts_the_store_password(tmp_path: Path) -> None:
    """PostgreSQL (trust authentication ignores the password, so the server really starts)."""
    from tests.servers import isolated_url

    with isolated_url("postgres", tmp_path) as url:
        secret_url = url.replace("postgres@", "postgres:pw-Secret-1234@", 1)
        assert secret_url != url
        with tether_server(tmp_path, "--no-maintenance", "--url", secret_url,
                           "--token-file", token_file(tmp_path)) as served:
            start = served.wait_line("tether server listening on")
            assert "postgres:***@127.0.0.1:5432" in start, start
            assert served.stop() == 0
            assert "pw-Secret" not in served.text()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_second_server_on_the_same_port_is_refused(tmp_path: Path) -> None:
    """gRPC's default SO_REUSEPORT let two servers share a port (and split the calls between
    two stores); the second must be refused."""
    with tether_server(tmp_path, "--insecure", "--no-maintenance", "--url",
                       f"sqlite:///{tmp_path / 'a.db'}", name="first") as first:
        line = refused(tmp_path, "--listen", first.address, "--insecure", "--no-maintenance",
                       "--url", f"sqlite:///{tmp_path / 'b.db'}")
        assert f"cannot listen on {first.address}" in line
        assert first.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_start_line_in_json(tmp_path: Path) -> None:
    import json

    with tether_server(tmp_path, "--no-maintenance", "--log-format", "json", "--url",
                       f"sqlite:///{tmp_path / 'served.db'}", "--token-file",
                       token_file(tmp_path)) as served:
        start = json.loads(served.wait_line("tether server listening on"))
        assert start["listen"] == served.address and start["tls"] is False
        assert start["tokens"] == {"worker": 1, "admin": 1}
        assert "maintenance" not in start and start["store"].startswith("sqlite:///")
        assert served.stop() == 0
