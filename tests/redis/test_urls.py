"""Redis URLs (issue #8, I): bad input gets one ConfigError naming the field, at once, and no
password ever appears in an error or in what the store shows of its URL."""

from __future__ import annotations

import pytest

from tether._errors import ConfigError
from tether.stores import open_store
from tether.stores._redis.store import RedisStore
from tether.stores._urls import redact

SECRET = "s3cr3t-pw"

BAD_URLS = {
    "db not a number": ("redis://127.0.0.1:6379/abc?prefix=x", "db"),
    "db negative": ("redis://127.0.0.1:6379/-1?prefix=x", "db"),
    "db query not a number": ("redis://127.0.0.1:6379?db=one&prefix=x", "db"),
    "empty prefix": ("redis://127.0.0.1:6379/0?prefix=", "prefix"),
    "prefix with a space": ("redis://127.0.0.1:6379/0?prefix=a b", "prefix"),
    "prefix with a glob": ("redis://127.0.0.1:6379/0?prefix=a*", "prefix"),
    "port out of range": ("redis://127.0.0.1:99999/0", "port"),
    "port not a number": ("redis://127.0.0.1:http/0", "port"),
    "unknown parameter": ("redis://127.0.0.1:6379/0?prefix=x&sockettimeout=5", "sockettimeout"),
    "bad timeout value": ("redis://127.0.0.1:6379/0?socket_timeout=soon", "socket_timeout"),
    "decode_responses": ("redis://127.0.0.1:6379/0?decode_responses=no", "decode_responses"),
    "deadline zero": ("redis://127.0.0.1:6379/0?deadline=0", "deadline"),
    "deadline not a number": ("redis://127.0.0.1:6379/0?deadline=soon", "deadline"),
}


def test_the_deadline_bounds_every_wait_of_the_client() -> None:
    """``deadline`` (tether's, not redis-py's) sets the socket and connect timeouts; the
    option wins over the URL, and a socket_timeout of the user's own wins for reads."""
    cases = [("redis://127.0.0.1:6379/0", {}, 5.0, 5.0),
             ("redis://127.0.0.1:6379/0?deadline=2", {}, 2.0, 2.0),
             ("redis://127.0.0.1:6379/0?deadline=2", {"deadline": 3}, 3.0, 3.0),
             ("redis://127.0.0.1:6379/0?deadline=2&socket_timeout=7", {}, 2.0, 7.0)]
    for url, options, deadline, read in cases:
        store = RedisStore(url, **options)
        try:
            kwargs = store._client.connection_pool.connection_kwargs
            assert store.deadline == deadline
            assert kwargs["socket_connect_timeout"] == deadline
            assert float(kwargs["socket_timeout"]) == read
            assert "deadline" not in kwargs
        finally:
            store.close()


@pytest.mark.parametrize("case", sorted(BAD_URLS))
def test_a_bad_url_is_one_config_error_naming_the_field(case: str) -> None:
    url, field = BAD_URLS[case]
    for make in (RedisStore, open_store):
        with pytest.raises(ConfigError, match=field) as info:
            store = make(url)
            store.close()  # pragma: no cover - only reached when nothing was refused
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("case", sorted(BAD_URLS))
def test_no_password_in_the_error(case: str) -> None:
    url, _ = BAD_URLS[case]
    with_netloc = url.replace("redis://", f"redis://user:{SECRET}@")
    sep = "&" if "?" in url else "?"
    with_param = f"{url}{sep}password={SECRET}"
    for bad in (with_netloc, with_param):
        with pytest.raises(ConfigError) as info:
            RedisStore(bad).close()
        assert SECRET not in str(info.value)
        assert SECRET not in repr(info.value.__cause__ or "")


def test_good_urls_are_accepted_and_shown_without_password() -> None:
    for url in (
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/",
        "redis://127.0.0.1:6379/3?prefix=app",
        f"redis://:{SECRET}@127.0.0.1:6379/0?prefix=app",
        f"redis://127.0.0.1:6379/0?prefix=app&password={SECRET}&socket_timeout=2.5",
        "rediss://127.0.0.1:6380/0?ssl_cert_reqs=none&health_check_interval=5",
        "redis://127.0.0.1:6379/0?db=2&client_name=tether-test&protocol=2",
    ):
        store = RedisStore(url)
        try:
            assert SECRET not in store._url
        finally:
            store.close()


def test_redact_hides_the_password_wherever_it_is() -> None:
    assert SECRET not in redact(f"redis://u:{SECRET}@h:6379/0")
    assert SECRET not in redact(f"redis://h:6379/0?password={SECRET}&prefix=p")
    assert SECRET not in redact(f"redis://u:{SECRET}@h:99999/0")
    assert "prefix=p" in redact(f"redis://h:6379/0?password={SECRET}&prefix=p")
    assert redact("redis://h:6379/0?prefix=p") == "redis://h:6379/0?prefix=p"
