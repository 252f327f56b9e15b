"""``tether dashboard``: serve the dashboard with uvicorn (127.0.0.1 unless told otherwise)."""

from __future__ import annotations

import logging

import uvicorn

from tether._cli.common import connect
from tether._config import Settings
from tether._flowview import Declared
from tether.dashboard._app import create_app
from tether.stores._urls import redact

log = logging.getLogger("tether.dashboard")


def run(url: str, *, settings: Settings, host: str, port: int, read_only: bool,
        token: str | None, basic: str | None, limits: list[Declared] | None = None) -> int:
    connect(url).close()  # fail fast, with the CLI's exit codes, on a missing store
    app = create_app(lambda: connect(url), settings=settings, read_only=read_only, token=token,
                     basic=basic, flow=limits)
    log.info("tether dashboard on http://%s:%d/ (store %s%s)", host, port, redact(url),
             ", read-only" if read_only else "")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return 0
