"""A wrong ``settings.TETHER`` stops Django at start-up (``django.setup()``, so ``manage.py``
and the web server alike) with one ImproperlyConfigured naming the key: never later, at the
first enqueue of a request. Each case in a process of its own (settings are once per process).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.conftest import example_env

PG = ('{"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "test", '
      '"USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432"}}')
LITE = '{"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}'


def _setup(tmp_path: Path, databases: str, tether: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "startup_settings.py").write_text(
        "SECRET_KEY = 'x'\n"
        "INSTALLED_APPS = ['tether.contrib.django']\n"
        f"DATABASES = {databases}\n"
        f"TETHER = {tether}\n")
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('started')"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env=example_env(DJANGO_SETTINGS_MODULE="startup_settings", PYTHONPATH=str(tmp_path)))


@pytest.mark.parametrize(("databases", "tether", "says"), [
    # explicit "connection" with tether's PostgreSQL store on another database
    (PG, '{"url": "postgresql://postgres@127.0.0.1:5432/elsewhere", '
         '"transaction": "connection"}', "same host, port and name"),
    # explicit "connection" where Django is not on PostgreSQL
    (LITE, '{"url": "sqlite:///q.db", "transaction": "connection"}', "needs the PostgreSQL"),
    (LITE, '{"include": "shop.tasks"}', "include"),
    (LITE, '{"url": "sqlite:///q.db", "lease_tll": 5}', "lease_tll"),
])
def test_a_wrong_setting_stops_django_at_start_up(
    tmp_path: Path, databases: str, tether: str, says: str
) -> None:
    done = _setup(tmp_path, databases, tether)
    assert done.returncode != 0 and "started" not in done.stdout, done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: settings.TETHER"), \
        done.stderr[-2000:]
    assert says in last


def test_a_right_connection_setting_starts(tmp_path: Path) -> None:
    done = _setup(tmp_path, PG, '{"transaction": "connection"}')
    assert done.returncode == 0, done.stderr[-2000:]
    assert "started" in done.stdout
