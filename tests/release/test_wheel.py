"""The release artefacts (issue #24, item 1): ``python -m build`` makes an sdist and a wheel
that ``twine check`` passes, and the wheel, installed alone into a fresh venv, runs ``tether
demo`` to the end.

Offline: the build uses the test venv's setuptools (``--no-isolation``), the wheel is installed
with ``--no-deps --no-index`` (the core has no runtime dependencies), and the demo runs on a
temporary SQLite file. The build runs on a copy of the checkout, so it leaves nothing in it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tether._install import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
#: What the build reads: pyproject, MANIFEST.in, the files the metadata and sdist name, src.
SOURCES = ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md", "docs", "src")


def _copy_checkout(to: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    to.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, to / name, ignore=ignore)
        else:
            shutil.copy2(source, to / name)
    return to


def _clean_env() -> dict[str, str]:
    """The environment without anything that would find the checkout's tether instead."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TETHER_URL", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.timeout(900)
def test_built_wheel_installs_into_a_fresh_venv_and_runs_the_demo(tmp_path: Path) -> None:
    source = _copy_checkout(tmp_path / "checkout")
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), "."], source)
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    assert wheels[0].name.startswith("tether_queue-"), wheels[0].name
    _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sdists + wheels)], source)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels[0])],
         tmp_path)
    where = _run([str(python), "-c", "import tether; print(tether.__file__)"], tmp_path)
    assert str(venv) in where.stdout, f"tether imported from {where.stdout.strip()}, not the venv"
    demo = _run([str(venv / "bin" / "tether"), "demo"], tmp_path, timeout=600)
    assert "every invariant held" in demo.stdout, demo.stdout + demo.stderr


def test_install_hints_name_the_extras_of_pyproject() -> None:
    """The packages an ImportError's hint names are the extra's own (tether._install)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    own = {name: tuple(reqs) for name, reqs in extras.items()
           if not any(r.startswith("tether-queue[") for r in reqs) and name != "test"}
    assert own == EXTRAS
