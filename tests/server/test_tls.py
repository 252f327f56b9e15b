"""``ServerTLS``: the certificate and key files are read (and refused in one line) when the
server starts (issue #21)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tether import ConfigError
from tether._server.tls import ServerTLS


def make_cert(folder: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` (and 127.0.0.1) and its key, made by openssl."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name},IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60)
    return cert, key


def test_credentials_from_real_files(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    tls = ServerTLS(str(cert), str(key))
    chain, secret = tls.load()
    assert b"CERTIFICATE" in chain and b"PRIVATE KEY" in secret
    assert tls.credentials() is not None


def test_unreadable_or_wrong_files_are_one_clear_error(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    with pytest.raises(ConfigError, match=r"cannot read the TLS certificate .*nope\.crt: No such"):
        ServerTLS(str(tmp_path / "nope.crt"), str(key)).load()
    with pytest.raises(ConfigError, match="cannot read the TLS key"):
        ServerTLS(str(cert), str(tmp_path)).load()
    with pytest.raises(ConfigError, match=r"TLS key .* is not a PEM file holding a PRIVATE KEY"):
        ServerTLS(str(cert), str(cert)).load()  # the key and the certificate swapped
    with pytest.raises(ConfigError, match="is not a PEM file holding a CERTIFICATE"):
        ServerTLS(str(key), str(key)).load()
