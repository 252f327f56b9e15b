"""A real ``tether server`` subprocess for tests: start it, read its log, stop it.

Why a helper: every CLI test of the server needs the bound port (it listens on port 0 so
tests running at once never collide), which only its start line says, and the log to look
for lines in; both are read from the process's output file, waiting on conditions.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.crash.harness import wait_for

START = re.compile(r"tether server listening on (?P<host>\S+):(?P<port>\d+) ")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any TETHER_* variable of the caller's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(extra)
    return env


def run_cli(argv: Sequence[str], cwd: Path, timeout: float = 60,
            **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=clean_env(**env))


class Served:
    """A running ``tether server``: its process, log file and bound address."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log
        self.port = 0

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self, needle: str) -> list[str]:
        """Log lines holding ``needle``; fails at once if the server exited."""
        if self.proc.poll() is not None:
            raise AssertionError(f"tether server exited ({self.proc.returncode}): "
                                 f"{self.text()}")
        return [line for line in self.text().splitlines() if needle in line]

    def wait_line(self, needle: str, count: int = 1) -> str:
        found = wait_for(lambda: len(self.lines(needle)) >= count and self.lines(needle), 60,
                         f"a server log line with {needle!r}")
        return found[count - 1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@contextmanager
def tether_server(tmp_path: Path, *argv: str, name: str = "server",
                  **env: str) -> Iterator[Served]:
    """``tether server --listen 127.0.0.1:0 ARGV...``, started and its port read."""
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether", "server", "--listen", "127.0.0.1:0", *argv],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=clean_env(**env))
    served = Served(proc, log)
    try:
        line = served.wait_line("tether server listening on")
        found = START.search(line)
        assert found is not None, line
        served.port = int(found["port"])
        yield served
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


__all__ = ["Served", "clean_env", "run_cli", "tether_server"]
