"""Passwords that were not percent-encoded: the whole user info is hidden, and the message
says to percent-encode (issue 18 F)."""

from __future__ import annotations

import logging

import pytest

from tether._errors import TetherError
from tether.stores import open_store
from tether.stores._urls import redact

#: Every reserved character of RFC 3986, '%' and a space, between letters so that any
#: fragment of three characters or more is recognisable.
PASSWORD = "Pw:/?#[]@!$&'()*+,;=% end"
HINT = "percent-encode"


def fragments(secret: str, size: int = 3) -> set[str]:
    return {secret[i:i + n] for n in range(size, len(secret) + 1)
            for i in range(len(secret) - n + 1)}


def leaked(text: str) -> list[str]:
    return sorted(f for f in fragments(PASSWORD) if f in text)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "redis", "rediss"])
@pytest.mark.parametrize("tail", ["127.0.0.1:1/db", "127.0.0.1:1/0?x=1", "127.0.0.1/",
                                  "[::1]:1/0", "127.0.0.1:1/db?application_name=a@b"])
def test_redact_hides_every_fragment_of_an_unencoded_password(scheme: str, tail: str) -> None:
    url = f"{scheme}://someone:{PASSWORD}@{tail}"
    shown = redact(url)
    assert not leaked(shown), (shown, leaked(shown))
    assert shown.startswith(f"{scheme}://***@")


def test_the_report_of_issue_18() -> None:
    shown = redact("postgresql://r3:p@ss:w/rd%?#@host/db")
    assert shown == "postgresql://***@host/db"


def test_clean_urls_keep_the_user_and_host() -> None:
    assert redact("postgresql://u:p%40ss%3Aw%2Frd%25%3F%23@host/db") == (
        "postgresql://u:***@host/db")
    assert redact("redis://:pw@h:6379/0?prefix=p") == "redis://:***@h:6379/0?prefix=p"


@pytest.mark.parametrize("scheme", ["postgresql", "redis", "rediss"])
def test_opening_says_to_percent_encode_and_leaks_nothing(
    scheme: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = 5432 if scheme == "postgresql" else 6379
    url = f"{scheme}://someone:{PASSWORD}@127.0.0.1:{port}/{'test' if port == 5432 else '0'}"
    with pytest.raises(TetherError) as caught:
        open_store(url, **({"connect_timeout": 2} if port == 5432 else {})).close()
    text = f"{caught.value} {caught.value!r} {caught.value.__cause__!r} {caplog.text}"
    assert not leaked(text), (text, leaked(text))
    assert HINT in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("url", ["tether://tok-123@h:1", "tethers://tok-123@h:1,g:2?ca=/x",
                                 "TETHER://tok-123@h:1", "tether://tok%2D123@h:1"])
def test_redact_hides_a_tether_token(url: str) -> None:
    """A tether:// URL's user info is a token with no ':' (issue #21): masked whole."""
    shown = redact(url)
    assert "tok" not in shown and "***@h:1" in shown
