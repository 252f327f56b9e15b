"""``tether://`` and ``tethers://`` URLs: parsing, one clear error per bad input, and the
token masked wherever a URL is shown (issue #21)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tether import ConfigError
from tether.stores._remote.url import DEFAULT_TIMEOUT, RemoteURL
from tether.stores._urls import redact, scrub, secrets_in

TOKEN = "tok-0123456789abcdef"


def test_one_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_TOKEN", raising=False)
    url = RemoteURL.parse(f"tether://{TOKEN}@server.example:7400")
    assert (url.token, url.hosts, url.tls, url.ca_file, url.timeout) == (
        TOKEN, (("server.example", 7400),), False, None, DEFAULT_TIMEOUT)
    assert TOKEN not in repr(url)


def test_several_hosts_ipv6_timeout_and_encoded_token() -> None:
    url = RemoteURL.parse("TETHER://a%40b%3Ac%2Fd%25@10.0.0.1:7400,[::1]:7401,h-2:1/")
    assert url.token == "a@b:c/d%"
    assert url.hosts == (("10.0.0.1", 7400), ("::1", 7401), ("h-2", 1))
    assert url.targets == ["10.0.0.1:7400", "[::1]:7401", "h-2:1"]


def test_tls_with_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    url = RemoteURL.parse(f"tethers://{TOKEN}@h:7400?ca={ca}")
    assert (url.tls, url.ca_file) == (True, str(ca))
    assert RemoteURL.parse(f"tethers://{TOKEN}@h:7400").ca_file is None  # system roots


def test_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_TOKEN", TOKEN)
    assert RemoteURL.parse("tether://h:7400").token == TOKEN
    assert RemoteURL.parse("tether://@h:7400").token == TOKEN
    assert RemoteURL.parse("tether://other-token@h:7400").token == "other-token"  # URL wins
    monkeypatch.delenv("TETHER_TOKEN")
    assert RemoteURL.parse("tether://h:7400").token is None  # the server says what is missing


@pytest.mark.parametrize(("url", "says"), [
    ("http://h:1", "is not a tether server URL"),
    ("tether:h:1", "is not a tether server URL"),
    ("tether://T@h", "is not HOST:PORT"),
    ("tether://T@h:x", "is not HOST:PORT"),
    ("tether://T@h:0", "port 0 is not between 1 and 65535"),
    ("tether://T@h:70000", "port 70000 is not between 1 and 65535"),
    ("tether://T@h:1,", "a host is missing"),
    ("tether://T@", "a host is missing"),
    ("tether://T@h:1/db", "has no path"),
    ("tether://T@h:1#frag", "has no #fragment"),
    ("tether://T@h:1?ca=x", "?ca= needs TLS: use tethers://"),
    ("tethers://T@h:1?ca=", "?ca= needs a file"),
    ("tethers://T@h:1?ca=/no/such/ca.pem", "cannot read the CA file /no/such/ca.pem"),
    ("tether://T@h:1?timeout=3", "use ?deadline=SECONDS"),
    ("tether://T@h:1?prefix=x", "unknown option 'prefix'"),
    ("tether://T%20k@h:1", "the URL's token holds characters"),
])
def test_one_clear_error_per_bad_input(url: str, says: str) -> None:
    secret = url.replace("T@", "SECRET-TOKEN@")
    with pytest.raises(ConfigError) as caught:
        RemoteURL.parse(secret)
    assert says in str(caught.value)
    assert "SECRET" not in str(caught.value)


def test_a_bad_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_TOKEN", "has space")
    with pytest.raises(ConfigError, match=r"\$TETHER_TOKEN holds characters") as caught:
        RemoteURL.parse("tether://h:1")
    assert "has space" not in str(caught.value)


@pytest.mark.parametrize("url", [
    f"tether://{TOKEN}@h:7400", f"TETHERS://{TOKEN}@h:7400?ca=/x",
    f"tether://{TOKEN}@h:1,h:2", "tether://user:pass-word@h:1",
    "tether://a%40b%2Fsecret@h:1",
])
def test_redact_masks_the_whole_user_info(url: str) -> None:
    shown = redact(url)
    userinfo = url.split("://", 1)[1].rsplit("@", 1)[0]
    assert userinfo not in shown and "***@h:" in shown, shown
    assert shown.split("://")[0] == url.split("://", maxsplit=1)[0]


def test_redact_keeps_a_url_without_token() -> None:
    assert redact("tether://h:7400,h2:7400?deadline=3") == "tether://h:7400,h2:7400?deadline=3"


def test_the_store_takes_its_deadline_out_before_the_parse() -> None:
    from tether.stores import open_store

    store = open_store(f"tether://{TOKEN}@127.0.0.1:1?deadline=2.5")
    try:
        assert store.deadline == 2.5  # type: ignore[attr-defined]
    finally:
        store.close()


def test_scrub_removes_the_token_raw_and_decoded() -> None:
    url = "tether://a%40b%2Fsecret@h:1"
    assert {"a%40b%2Fsecret", "a@b/secret"} <= set(secrets_in(url))
    text = "refused a@b/secret and a%40b%2Fsecret"
    assert scrub(text, url) == "refused *** and ***"
    assert scrub(f"x {TOKEN} y", f"tether://{TOKEN}@h:1") == "x *** y"


def test_the_worker_banner_never_shows_the_token(caplog: pytest.LogCaptureFixture) -> None:
    from tether._config import make_settings
    from tether._logs import worker_banner

    message, fields = worker_banner(make_settings(), f"tether://{TOKEN}@h:7400", ["t"], "w1",
                                    ["default"], 1)
    assert TOKEN not in message and TOKEN not in str(fields)
    with caplog.at_level(logging.INFO):
        logging.getLogger("tether.test").info("%s", message, extra=fields)
    assert TOKEN not in caplog.text
