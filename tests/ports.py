"""A free loopback port for a server a test starts (a throwaway redis-server, PostgreSQL or
PgBouncer, a metrics or dashboard HTTP server).

Why: the shared servers keep their fixed ports; anything a test starts must not collide with
them nor with the other helpers' and workers' tests running at the same time.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS picks it); the caller binds it next."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


__all__ = ["free_port"]
