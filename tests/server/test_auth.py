"""The token file, roles and the per-call check of ``tether server`` (issue #21): real files,
and no token ever in a message."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

import pytest

from tether import AuthError, ConfigError
from tether._server.auth import Authorizer, Role, Tokens, fingerprint, method_name
from tether._server.reload import TokenReloader
from tether._wire import roles

WORKER_TOKEN = "w-0123456789abcdef0123"
ADMIN_TOKEN = "a-0123456789abcdef0123"


def write(tmp_path: Path, text: str, name: str = "tokens") -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_load_reads_roles_comments_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, f"# fleet tokens\n\n  {WORKER_TOKEN} worker   # the workers\n"
                           f"{ADMIN_TOKEN}\tADMIN\n")
    tokens = Tokens.load(path)
    assert tokens.role_of(WORKER_TOKEN) is Role.WORKER
    assert tokens.role_of(ADMIN_TOKEN) is Role.ADMIN
    assert tokens.role_of("w-0123456789abcdef012") is None  # a prefix is not the token
    assert tokens.role_of(WORKER_TOKEN + "x") is None
    assert tokens.role_of(None) is None and tokens.role_of("") is None
    assert tokens.role_of("ünïcode") is None
    assert tokens.counts() == {Role.WORKER: 1, Role.ADMIN: 1}
    assert WORKER_TOKEN not in repr(tokens) and ADMIN_TOKEN not in repr(tokens)


@pytest.mark.parametrize(("text", "line", "says"), [
    (f"# c\n{WORKER_TOKEN}\n", 2, "expected `TOKEN ROLE`"),
    (f"\n\n{WORKER_TOKEN} worker extra\n", 3, "expected `TOKEN ROLE`"),
    (f"{WORKER_TOKEN} root\n", 1, "unknown role 'root'"),
    (f"{WORKER_TOKEN} worker\n{ADMIN_TOKEN} admin\n{WORKER_TOKEN} admin\n", 3,
     "the same token as line 1"),
    (f"{WORKER_TOKEN}é worker\n", 1, "cannot travel in a gRPC header"),
])
def test_a_bad_line_is_named_by_number_never_by_token(tmp_path: Path, text: str, line: int,
                                                      says: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        Tokens.load(path)
    message = str(caught.value)
    assert f"{path} line {line}:" in message and says in message, message
    assert WORKER_TOKEN[:6] not in message and ADMIN_TOKEN[:6] not in message


def test_an_empty_or_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no tokens"):
        Tokens.load(write(tmp_path, "# nothing yet\n\n"))
    with pytest.raises(ConfigError, match=r"cannot read the token file .*missing"):
        Tokens.load(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="cannot read the token file"):
        Tokens.load(str(tmp_path))  # a directory


def test_short_tokens_and_open_permissions_are_warned_about(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, f"short worker\n{ADMIN_TOKEN} admin\n")
    with caplog.at_level(logging.WARNING, logger="tether.server"):
        Tokens.load(path)
    assert "line 1: token sha256:" in caplog.text and "shorter than 16" in caplog.text
    assert "short " not in caplog.text.replace("shorter", "")
    assert "can be read by other users" not in caplog.text
    os.chmod(path, 0o644)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tether.server"):
        Tokens.load(path)
    assert "can be read by other users (mode 644)" in caplog.text


def test_fingerprint_is_short_stable_and_not_the_token() -> None:
    assert fingerprint("secret") == fingerprint("secret")
    assert fingerprint("secret") != fingerprint("secreT")
    assert fingerprint("secret").startswith("sha256:") and len(fingerprint("secret")) == 15
    assert "secret" not in fingerprint("secret")


def test_roles_table_worker_is_a_subset_of_admin() -> None:
    assert roles.WORKER < roles.ADMIN
    for method in ("claim", "heartbeat", "finish", "enqueue", "get_job", "wait_for_finish",
                   "reap_expired", "leader_acquire", "hello"):
        assert method in roles.WORKER
    for method in ("cancel", "retry_failed", "purge", "pause_queue", "resume_queue",
                   "list_jobs", "search_jobs", "counts", "list_workers"):
        assert method in roles.ADMIN and method not in roles.WORKER
    # migrate: the service refuses a worker token unless nothing needs doing.
    assert "migrate" in roles.WORKER


def test_authorizer_checks_token_and_method(tmp_path: Path) -> None:
    auth = Authorizer(Tokens.load(write(tmp_path, f"{WORKER_TOKEN} worker\n"
                                                  f"{ADMIN_TOKEN} admin\n")))
    assert auth.check(WORKER_TOKEN, "claim") is Role.WORKER
    assert auth.check(WORKER_TOKEN, "/tether.v1.Store/WaitForJobs") is Role.WORKER
    assert auth.check(ADMIN_TOKEN, "Purge") is Role.ADMIN
    with pytest.raises(AuthError) as caught:
        auth.check(WORKER_TOKEN, "purge")
    assert caught.value.code == "permission_denied"
    assert str(caught.value) == (f"refused token {fingerprint(WORKER_TOKEN)} (worker) for "
                                 "purge: that needs an admin token")
    with pytest.raises(AuthError) as caught:
        auth.check("a-wrong-token-of-some-length", "claim")
    assert caught.value.code == "unauthenticated"
    assert str(caught.value) == (f"refused token {fingerprint('a-wrong-token-of-some-length')}"
                                 ": unknown token")
    assert "a-wrong" not in str(caught.value)
    with pytest.raises(AuthError, match="refused a call to claim without a token") as caught:
        auth.check(None, "claim")
    assert caught.value.code == "unauthenticated"
    assert isinstance(caught.value, ConfigError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), again.code, str(again)) == (AuthError, "unauthenticated",
                                                     str(caught.value))


def test_insecure_authorizer_makes_everyone_admin() -> None:
    assert Authorizer(None).check(None, "purge") is Role.ADMIN


def test_method_names() -> None:
    assert method_name("SaveCheckpoint") == "save_checkpoint"
    assert method_name("/tether.v1.Store/DeleteDeadWorkers") == "delete_dead_workers"
    assert method_name("leader_get") == "leader_get"
    assert {method_name(m) for m in ("Now", "Info", "Hello")} == {"now", "info", "hello"}


def test_reload_swaps_tokens_and_a_bad_file_keeps_the_old_ones(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, f"{WORKER_TOKEN} worker\n")
    auth = Authorizer(Tokens.load(path))
    reloader = TokenReloader(auth, path)
    assert reloader.poll() is None  # nothing asked
    write(tmp_path, f"{ADMIN_TOKEN} admin\n")
    reloader.request()
    assert reloader.poll() is True
    assert auth.check(ADMIN_TOKEN, "purge") is Role.ADMIN
    with pytest.raises(AuthError):
        auth.check(WORKER_TOKEN, "claim")  # revoked
    write(tmp_path, f"{WORKER_TOKEN} worker\n{WORKER_TOKEN} worker\n")
    reloader.request()
    with caplog.at_level(logging.INFO, logger="tether.server"):
        assert reloader.poll() is False
    assert "keeping the old tokens" in caplog.text and "line 2" in caplog.text
    assert WORKER_TOKEN not in caplog.text
    assert auth.check(ADMIN_TOKEN, "purge") is Role.ADMIN  # the old snapshot still holds
    assert reloader.reloads == 2


def test_refusals_are_logged_once_a_minute_by_fingerprint(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    auth = Authorizer(Tokens.load(write(tmp_path, f"{WORKER_TOKEN} worker\n")))
    with caplog.at_level(logging.WARNING, logger="tether.server"):
        for _ in range(3):
            with pytest.raises(AuthError):
                auth.check("a-wrong-token-of-some-length", "claim")
        with pytest.raises(AuthError):
            auth.check(WORKER_TOKEN, "purge")
    refusals = [r.getMessage() for r in caplog.records]
    assert refusals == [
        f"refused token {fingerprint('a-wrong-token-of-some-length')}: unknown token",
        f"refused token {fingerprint(WORKER_TOKEN)} (worker) for purge: that needs an admin "
        "token",
    ]
    assert "a-wrong" not in caplog.text and WORKER_TOKEN not in caplog.text
