"""settings.TETHER read into a Config (pure: no Django settings needed), the URL built from
DATABASES, and which tether URLs name Django's database."""

from __future__ import annotations

import argparse

import pytest

from tether._cli.main import build_parser
from tether.contrib.django.conf import SettingsError, postgres_url, read, same_database

PG = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "USER": "app",
      "PASSWORD": "s3cr:t@", "HOST": "db.internal", "PORT": "6432"}
LITE = {"ENGINE": "django.db.backends.sqlite3", "NAME": "/tmp/x.sqlite3"}


def test_url_comes_from_tether_then_tether_url_then_environment() -> None:
    dbs = {"default": LITE}
    assert read({"url": "redis://h/0"}, "sqlite:///b.db", dbs, {"TETHER_URL": "c"}).url == \
        "redis://h/0"
    assert read({}, "sqlite:///b.db", dbs, {"TETHER_URL": "c"}).url == "sqlite:///b.db"
    assert read(None, None, dbs, {"TETHER_URL": "redis://e/1"}).url == "redis://e/1"
    assert read(None, None, dbs, {}).url is None  # tether's default (an SQLite file)


def test_postgres_databases_give_the_url_on_the_same_database() -> None:
    config = read({"schema": "jobs"}, None, {"default": PG}, {})
    assert config.derived
    assert config.url == "postgresql://app:s3cr%3At%40@db.internal:6432/shop?schema=jobs"
    assert same_database(config.url, PG)
    assert postgres_url(LITE, "tether") is None
    socket = postgres_url({**PG, "HOST": "/run/postgresql", "PASSWORD": ""}, "tether")
    assert socket == "postgresql://app@/shop?schema=tether&host=%2Frun%2Fpostgresql&port=6432"


def test_options_pass_to_the_app_and_bad_settings_are_named() -> None:
    config = read({"url": "sqlite:///q.db", "lease_ttl": 5, "include": ["a.tasks"],
                   "transaction": "on_commit"}, None, {"default": LITE}, {})
    assert config.options == {"lease_ttl": 5}
    assert config.include == ("a.tasks",) and config.transaction == "on_commit"
    bad = [({"transaction": "sometimes"}, "transaction"), ({"database": "other"}, "other"),
           ({"include": "a.tasks"}, "include"), ({"url": "x", "schema": "s"}, "schema")]
    for tether, word in bad:
        with pytest.raises(SettingsError, match=word):
            read(tether, None, {"default": LITE}, {})
    with pytest.raises(SettingsError, match="dict"):
        read(["url"], None, {"default": LITE}, {})  # type: ignore[arg-type]


@pytest.mark.parametrize(("url", "same"), [
    ("postgresql://app@db.internal:6432/shop?schema=q", True),
    ("postgresql://other@db.internal:6432/shop", True),  # the user does not matter
    ("postgresql://app@db.internal:5432/shop", False),
    ("postgresql://app@db.internal:6432/other", False),
    ("postgresql://app@elsewhere:6432/shop", False),
    ("redis://db.internal:6432/0", False),
])
def test_same_database(url: str, same: bool) -> None:
    assert same_database(url, PG) is same


def test_local_spellings_of_the_host_are_one() -> None:
    local = {**PG, "HOST": "", "PORT": ""}
    assert same_database("postgresql://postgres@127.0.0.1:5432/shop", local)
    assert same_database("postgresql://postgres@localhost/shop", {**local, "HOST": "/tmp"})
    assert not same_database("postgresql://postgres@localhost/shop", LITE)


def test_manage_py_tether_worker_has_every_option_of_tether_worker() -> None:
    from tether.contrib.django.management.commands.tether_worker import worker_actions

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    worker = sub.choices["worker"]
    expected = {s for a in worker._actions for s in a.option_strings} - {"-h", "--help",
                                                                          "--app"}
    assert {s for a in worker_actions() for s in a.option_strings} == expected


@pytest.mark.parametrize(("tether", "word"), [
    ({"include": 5}, "include"),
    ({"include": None}, "include"),
    ({"include": [b"shop.tasks"]}, "include"),
    ({"autodiscover": "no"}, "autodiscover"),
    ({"schema": 5}, "schema"),
    ({"schema": ""}, "schema"),
    ({"schema": "jobs"}, "schema"),  # Django on SQLite: no URL is built, the schema is unused
    ({"database": ["default"]}, "database"),
    ({"transaction": ["auto"]}, "transaction"),
])
def test_every_wrong_value_is_one_settings_error(tether: dict[str, object], word: str) -> None:
    """A wrong value of any key is refused with a SettingsError naming the key (Django's
    ImproperlyConfigured at start-up), never a TypeError from inside, nor silently ignored."""
    with pytest.raises(SettingsError, match=word):
        read(tether, None, {"default": LITE}, {})
