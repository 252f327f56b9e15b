"""SQLite store URLs: ``sqlite:///relative.db`` and ``sqlite:////absolute/path.db``.

Invariant: a wrong URL gets exactly one :class:`ConfigError` that names what is wrong and how
to write it, and never echoes a password or a query value (a mistyped ``sqlite://user:pw@...``
or ``?password=`` must not land in a log). The SQLite store takes no URL parameters: its
options (``busy_timeout``) are constructor arguments, so any parameter is a mistake.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlsplit

from tether._errors import ConfigError

_FORMS = "use sqlite:///relative/path.db or sqlite:////absolute/path.db"


def parse_url(url: str) -> str:
    """``sqlite:///relative.db`` → ``relative.db``; ``sqlite:////abs/x.db`` → ``/abs/x.db``."""
    if not isinstance(url, str):
        raise ConfigError(f"a SQLite URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme != "sqlite":
        raise ConfigError(f"not a SQLite URL (scheme {scheme or 'missing'!r}): {_FORMS}")
    if parts.netloc:
        host = parts.hostname or ""
        tail = (host + parts.path).lstrip("/") or "tether.db"
        raise ConfigError(
            f"SQLite URL names a host ({host!r}), but SQLite has none: two slashes after "
            f"'sqlite:' start a host name. Write sqlite:///{tail} for a path relative to the "
            f"current directory, or sqlite:////{tail} for an absolute path"
        )
    if parts.query or parts.fragment:
        names = sorted({key for key, _ in parse_qsl(parts.query, keep_blank_values=True)})
        what = (
            f"unknown parameter{'s' if len(names) > 1 else ''} {', '.join(names)}"
            if names
            else "a query string or fragment"
        )
        raise ConfigError(
            f"SQLite URL has {what}; the SQLite store takes no URL parameters "
            "(pass busy_timeout= as an option)"
        )
    if not parts.path.startswith("/"):
        raise ConfigError(f"SQLite URL has no '///' before its path: {_FORMS}")
    path = unquote(parts.path[1:])
    if not path or path.endswith("/"):
        raise ConfigError(f"SQLite URL has no file path: {_FORMS}")
    if path == ":memory:" or path.startswith("file:"):
        raise ConfigError(
            f"SQLite URL names {path!r}, not a file: the SQLite store needs a file path "
            "(workers share it across processes)"
        )
    if "\x00" in path:
        raise ConfigError("SQLite URL path contains a NUL character")
    return path


def check_folder(path: str) -> None:
    """ConfigError when the file's directory does not exist.

    A missing directory is a configuration error, not an outage: tether creates the database
    file but never directories, and waiting will not make one appear (a worker retries an
    unreachable store at start, :mod:`tether._worker.startup`, and would wait for ever)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"the directory of the SQLite file {path!r} does not exist "
                          f"({folder}): create it first (tether creates the file, never "
                          "directories)")
