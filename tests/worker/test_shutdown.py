"""Shutdown signals: a second SIGTERM that lands while the first one's handler is still running
(a fast double Ctrl-C, or an orchestrator's TERM right after its first) must not deadlock the
main thread. Signal handlers run on the main thread between two bytecodes, so a handler that
takes a non-reentrant lock can interrupt itself while holding it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import logging, os, signal, sys
    from tether.worker.shutdown import Phase, Shutdown

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
