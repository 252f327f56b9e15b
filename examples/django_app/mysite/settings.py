"""Settings of the example shop: SQLite by default, PostgreSQL with ``SHOP_DB=postgres``.

On PostgreSQL tether's URL is left out: the integration builds it from ``DATABASES``, so jobs
are written on Django's own connection and commit or roll back with the request. On SQLite the
queue is a file of its own (``$TETHER_URL`` may name another store), and jobs are enqueued
when Django commits (``transaction.on_commit``).
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "mysite.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "tether.contrib.django",
    "shop",
]

if os.environ.get("SHOP_DB") == "postgres":
    # SHOP_PG_SCHEMA puts the shop's tables in a schema of their own (the tests use a fresh
    # one per test); tether's tables go to SHOP_TETHER_SCHEMA, in the same database.
    schema = os.environ.get("SHOP_PG_SCHEMA", "public")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("SHOP_PG_NAME", "test"),
            "USER": os.environ.get("SHOP_PG_USER", "postgres"),
            "HOST": os.environ.get("SHOP_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SHOP_PG_PORT", "5432"),
            "OPTIONS": {"options": f"-c search_path={schema}"},
        }
    }
    TETHER = {"schema": os.environ.get("SHOP_TETHER_SCHEMA", "tether")}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SHOP_SQLITE", str(BASE_DIR / "shop.sqlite3")),
            # Worker threads write concurrently: an IMMEDIATE transaction takes SQLite's write
            # lock at BEGIN and waits for it, where a deferred one that read first fails at
            # once with "database is locked" (Django 5.1+).
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        }
    }
    TETHER = {"url": os.environ.get("TETHER_URL", f"sqlite:///{BASE_DIR / 'queue.db'}")}

TETHER |= {
    "include": ["shop.tasks"],  # imported by every process, so the worker knows the tasks
    "lease_ttl": 10,            # any other key is an option of tether.App
}
