"""The implicit default store and mistyped ``TETHER_*`` variables are said out loud, and the
worker's start line names its store (issue 18 F)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import isolated_url

APP = '''
import tether

app = tether.App()


@app.task(name="dflt.add")
def add(a: int, b: int) -> int:
    return a + b
'''


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    return {**env, **extra}


def worker(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "dflt_app.py").write_text(APP)
    return subprocess.run(
        [sys.executable, "-m", "tether", "worker", "dflt_app:app", "--burst", *argv],
        cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
        env=clean_env(**env))


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " WARNING " in line]


def test_the_implicit_default_store_is_a_warning(tmp_path: Path) -> None:
    done = worker(tmp_path)
    assert done.returncode == 0, done.stderr
    found = [w for w in warnings(done.stderr) if "default store" in w]
    assert len(found) == 1, done.stderr
    assert str(tmp_path / "tether.db") in found[0] and "TETHER_URL" in found[0], found[0]


def test_a_mistyped_variable_is_a_warning_naming_the_right_one(tmp_path: Path) -> None:
    done = worker(tmp_path, TETHER_ULR=f"sqlite:///{tmp_path / 'real.db'}")
    assert done.returncode == 0, done.stderr
    found = [w for w in warnings(done.stderr) if "TETHER_ULR" in w]
    assert len(found) == 1, done.stderr
    assert "TETHER_URL" in found[0], found[0]
    assert any("default store" in w for w in warnings(done.stderr)), done.stderr


def test_a_producer_on_the_default_store_is_warned_too(tmp_path: Path) -> None:
    (tmp_path / "dflt_app.py").write_text(APP)
    done = subprocess.run(
        [sys.executable, "-c", "from dflt_app import add; add.enqueue(1, 2)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env=clean_env())
    assert done.returncode == 0, done.stderr
    assert "default store" in done.stderr and "TETHER_URL" in done.stderr, done.stderr


@pytest.mark.parametrize("how", ["--url", "TETHER_URL"])
def test_a_given_store_is_named_in_the_start_line_without_its_password(
    tmp_path: Path, how: str
) -> None:
    with isolated_url("postgres", tmp_path) as plain:
        url = plain.replace("postgresql://postgres@", "postgresql://postgres:Sekr1t-pw@")
        done = (worker(tmp_path, "--url", url) if how == "--url"
                else worker(tmp_path, TETHER_URL=url))
    assert done.returncode == 0, done.stderr
    assert "Sekr1t" not in done.stderr
    start = [line for line in done.stderr.splitlines() if " worker " in line and "store " in line]
    assert start and "store postgresql://postgres:***@127.0.0.1" in start[0], done.stderr
    assert not warnings(done.stderr), done.stderr
