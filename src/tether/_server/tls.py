"""TLS for ``tether server`` (minimal version; SHELL's replaces it at merge)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = ["ServerTLS"]


@dataclass(frozen=True)
class ServerTLS:
    cert_file: str
    key_file: str

    def credentials(self) -> grpc.ServerCredentials:
        key = Path(self.key_file).read_bytes()
        cert = Path(self.cert_file).read_bytes()
        return grpc.ssl_server_credentials([(key, cert)])
