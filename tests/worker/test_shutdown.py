"""Shutdown signals: a second SIGTERM that lands while the first one's handler is still running
(a fast double Ctrl-C, or an orchestrator's TERM right after its first) must not deadlock the
main thread. Signal handlers run on the main thread between two bytecodes, so a handler that
takes a non-reentrant lock can interrupt itself while holding it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import logging, os, signal, sys
    from tether._worker.shutdown import Phase, Shutdown

    sd = Shutdown()
    restore = sd.install()
    fired = []

    class SecondSignal(logging.Handler):
        # The first handler logs while it holds its lock: send the second signal right then,
        # so it is handled inside the first handler.
        def emit(self, record):
            if not fired:
                fired.append(1)
                os.kill(os.getpid(), signal.SIGTERM)

    log = logging.getLogger("tether.shutdown")
    log.addHandler(SecondSignal())
    log.setLevel(logging.WARNING)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100):  # let both handlers run
        sd.changed.wait(0.01)
    print("phase", int(sd.phase), flush=True)
    restore()
""")


@pytest.mark.timeout(60)
def test_a_second_sigterm_inside_the_first_handler_does_not_deadlock() -> None:
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True,
                             text=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("the main thread deadlocked in the nested signal handler")
    assert out.returncode == 0, out.stderr
    assert "phase 2" in out.stdout, out.stdout + out.stderr


OTHER_THREAD = textwrap.dedent("""
    import signal, sys, threading
    import tether

    app = tether.App(sys.argv[1], lease_ttl=3.0, shutdown_timeout=2.0, poll_interval=0.05)
    worker = app.worker(concurrency=1)

    def send() -> None:
        while not app.store.list_workers():
            threading.Event().wait(0.02)
        # The kernel gives a process-directed signal to any thread that does not block it;
        # pthread_kill makes that choice deterministic: not the main thread.
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=send, daemon=True).start()
    print("exit", worker.run(), flush=True)
""")


@pytest.mark.timeout(60)
def test_a_sigterm_caught_by_another_thread_still_stops_the_worker(tmp_path: Path) -> None:
    """CPython runs a signal's Python handler on the main thread, but only once that thread
    runs bytecode again: a main thread asleep in a lock without a timeout never noticed a
    SIGTERM the kernel had handed to another thread (the drain test's worker ran on, claiming,
    seen under load)."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    try:
        out = subprocess.run([sys.executable, "-c", OTHER_THREAD, url], check=False,
                             capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker never acted on a SIGTERM delivered to another thread")
    assert out.returncode == 0, out.stderr
    assert "exit 0" in out.stdout and "received SIGTERM" in out.stderr, out.stdout + out.stderr
