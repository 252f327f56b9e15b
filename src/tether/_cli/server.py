"""``tether server``: serve a store to remote workers and producers (``tether://``).

What it refuses, each in one line and exit 2 before anything is opened: no ``--token-file``
without ``--insecure``; ``--insecure`` on an address other than loopback (a server anyone on
the network could call as admin); a token file that does not load; half a TLS pair; a
``tether://`` store URL (a server in front of a server is almost always a client's
``$TETHER_URL`` inherited by mistake).

Then: the store is waited for like a worker waits for it, the reaper/pruner runs (the same
elections as ``tether reaper``) unless ``--no-maintenance``, one start line says where it
listens, which store (redacted) and how many tokens per role (never a token), SIGHUP re-reads
the token file, and SIGTERM/SIGINT stop it gracefully.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
from typing import TYPE_CHECKING, Any

from tether._errors import ConfigError
from tether._install import install_hint

if TYPE_CHECKING:
    from tether._server.auth import Tokens

log = logging.getLogger("tether.server")

_LISTEN = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9\-._]*)):(?P<port>\d+)$")
#: Seconds calls in flight get to finish on SIGTERM (waiting calls end at once).
STOP_GRACE = 5.0


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0 lets the system pick one)."""
    found = _LISTEN.match(text.strip())
    if found is None or not (found["v6"] or found["name"]):
        raise ConfigError(f"--listen {text!r} is not HOST:PORT (e.g. 0.0.0.0:7400, "
                          "127.0.0.1:7400, [::1]:7400)")
    port = int(found["port"])
    if port > 65535:
        raise ConfigError(f"--listen {text!r}: port {port} is above 65535")
    return found["v6"] or found["name"], port


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_options(args: argparse.Namespace) -> tuple[str, int]:
    host, port = listen_address(args.listen)
    if args.insecure and args.token_file:
        raise ConfigError("--insecure and --token-file exclude each other (--insecure: no "
                          "tokens, every caller is an admin)")
    if args.insecure and not is_loopback(host):
        raise ConfigError(f"--insecure only listens on a loopback address (127.0.0.1, ::1, "
                          f"localhost), not {host}: give --token-file to serve the network")
    if not args.insecure and not args.token_file:
        raise ConfigError("tether server needs --token-file FILE (one `TOKEN ROLE` per line, "
                          "role worker or admin); --insecure runs without tokens on loopback "
                          "only")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    return host, port


def _tokens_text(tokens: Tokens | None) -> str:
    if tokens is None:
        return "no tokens (--insecure: every caller is an admin)"
    counts = tokens.counts()
    return (f"tokens from {tokens.path}: " +
            ", ".join(f"{n} {role.value}" for role, n in counts.items()))


def cmd_server(args: argparse.Namespace) -> int:
    from tether._cli.common import connect
    from tether._cli.run import maintenance_setup, new_maintainer
    from tether._server.auth import Authorizer, Tokens
    from tether._server.reload import TokenReloader
    from tether._server.tls import ServerTLS
    from tether._worker.shutdown import Shutdown
    from tether._worker.startup import open_when_up
    from tether.stores._urls import redact

    host, port = _check_options(args)
    tokens = Tokens.load(args.token_file) if args.token_file else None
    tls = ServerTLS(args.tls_cert, args.tls_key) if args.tls_cert else None
    if tls is not None:
        tls.load()  # a bad file is one line now, not a handshake failure on every client
    runtime, settings, url = maintenance_setup(args)
    if url.lower().startswith(("tether://", "tethers://")):
        raise ConfigError(f"the store URL {redact(url)} is a tether server's: tether server "
                          "serves a store (sqlite://, postgresql://, redis://); give it --url "
                          "or the app")
    # Like a worker (_schema_start.py): a missing schema is created, an older one refused
    # ("run `tether migrate`") unless the app asks to upgrade (auto_migrate=True).
    create = not args.no_migrate and (runtime is None or runtime.auto_migrate is not False)
    upgrade = create and runtime is not None and runtime.auto_migrate is True
    # gRPC's C core logs its own copy of errors we report in one line (a port in use, a
    # client's failed TLS handshake) to stderr; GRPC_VERBOSITY=ERROR brings them back.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        from tether._server.serve import TetherServer
    except ImportError as exc:
        raise ConfigError(f"tether server needs {install_hint('server')} ({exc})") from None

    authorizer = Authorizer(tokens)
    shutdown = Shutdown(draining="stopping the server")
    restore = shutdown.install()
    reloader = TokenReloader(authorizer, args.token_file, wake=shutdown.changed.set) \
        if args.token_file else None
    restore_hup = reloader.install() if reloader is not None else (lambda: None)
    store = None
    try:
        store = open_when_up(lambda: connect(url, create=create, upgrade=upgrade), redact(url),
                             stop=shutdown)
        if store is None:
            return 0
        server = TetherServer(store, listen=f"[{host}]:{port}" if ":" in host else
                              f"{host}:{port}", authorizer=authorizer, tls=tls)
        try:
            bound = server.start()
        except (RuntimeError, OSError) as exc:  # grpc: "Failed to bind to address ..."
            raise ConfigError(f"cannot listen on {args.listen}: {exc}") from None
        maintainer, token = None, False
        if not args.no_maintenance:
            maintainer, token = new_maintainer(store, settings, runtime, "server")
            maintainer.start()
        shown_host = f"[{host}]" if ":" in host else host
        fields: dict[str, Any] = {
            "listen": f"{shown_host}:{bound}", "store": redact(url), "tls": tls is not None,
            "tokens": ({r.value: n for r, n in tokens.counts().items()}
                       if tokens is not None else None),
            "maintenance": maintainer.holder if maintainer is not None else None,
        }
        log.info("tether server listening on %s:%d (%s); store %s; %s; maintenance %s",
                 shown_host, bound, "TLS" if tls is not None else "plaintext",
                 fields["store"], _tokens_text(tokens),
                 f"on ({maintainer.holder})" if maintainer is not None else "off",
                 extra=fields)
        if runtime is None and maintainer is not None:
            log.warning("no MODULE:APP given: maintenance runs with the default settings "
                        "(retention, stall_grace, leader timing); give the app so they match "
                        "the workers'")
        try:
            while not shutdown.stopping and (maintainer is None or maintainer.alive):
                shutdown.changed.wait(0.5)
                if not shutdown.stopping:
                    shutdown.changed.clear()
                if reloader is not None:
                    reloader.poll()
        finally:
            log.info("tether server on %s:%d stopping", shown_host, bound)
            server.stop(STOP_GRACE)
            if maintainer is not None:
                maintainer.stop()  # releases leadership while the store is still open
                if token:
                    store.release_liveness(maintainer.holder)
        return 0 if shutdown.stopping else 1
    finally:
        restore_hup()
        restore()
        if store is not None:
            store.close()


def add_server(add: Any) -> None:
    """Register ``tether server`` (``add`` is main.py's helper that adds a command)."""
    p = add("server", cmd_server, "serve a store to remote workers and producers "
            "(tether://TOKEN@HOST:PORT) until SIGTERM/SIGINT",
            "tether server --url postgresql://app@db/app --listen 0.0.0.0:7400 "
            "--token-file /etc/tether/tokens")
    p.add_argument("target_app", metavar="MODULE:APP", nargs="?", default=None,
                   help="serve this app's store with its settings for maintenance (default: "
                   "--app, else $TETHER_APP)")
    p.add_argument("--url", default=None, help="the store to serve (default: the app's, else "
                   "$TETHER_URL, else sqlite:///tether.db)")
    p.add_argument("--listen", required=True, metavar="HOST:PORT",
                   help="address to listen on (0.0.0.0:7400 for every interface; port 0 picks "
                   "a free one, named in the start line)")
    p.add_argument("--token-file", default=None, metavar="FILE",
                   help="one `TOKEN ROLE` per line (role worker or admin); re-read on SIGHUP")
    p.add_argument("--insecure", action="store_true",
                   help="no tokens, every caller is an admin: loopback addresses only")
    p.add_argument("--tls-cert", default=None, metavar="FILE",
                   help="serve TLS with this certificate chain (PEM; with --tls-key)")
    p.add_argument("--tls-key", default=None, metavar="FILE", help="the TLS private key (PEM)")
    p.add_argument("--no-maintenance", action="store_true",
                   help="do not run the reaper/pruner in this server")
    p.add_argument("--no-migrate", action="store_true",
                   help="check the store's schema instead of creating or upgrading it")


__all__ = ["add_server", "cmd_server", "is_loopback", "listen_address"]
