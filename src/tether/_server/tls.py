"""TLS for ``tether server``: a certificate and key from files.

Why a class of its own: the files are read (and refused with one clear line naming the file
and what is wrong) when the server starts, not deep inside grpc on the first connection, where
a wrong path shows up as a handshake failure on every client instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether._errors import ConfigError

if TYPE_CHECKING:
    import grpc


def read_pem(path: str, what: str, marker: str) -> bytes:
    """The file's bytes; ConfigError naming ``what`` and the file when it cannot be read or
    holds no PEM block containing ``marker`` (``CERTIFICATE``, ``PRIVATE KEY``)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data or marker.encode() not in data:
        raise ConfigError(f"the {what} {path} is not a PEM file holding a {marker} "
                          "(-----BEGIN ... -----)")
    return data


@dataclass(frozen=True)
class ServerTLS:
    """The server's certificate chain and private key (PEM files)."""

    cert_file: str
    key_file: str

    def load(self) -> tuple[bytes, bytes]:
        """(certificate chain, key) bytes, checked: ConfigError naming the bad file."""
        return (read_pem(self.cert_file, "TLS certificate", "CERTIFICATE"),
                read_pem(self.key_file, "TLS key", "PRIVATE KEY"))

    def credentials(self) -> grpc.ServerCredentials:
        import grpc

        cert, key = self.load()
        return grpc.ssl_server_credentials([(key, cert)])


__all__ = ["ServerTLS", "read_pem"]
