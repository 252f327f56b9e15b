"""Store URL helpers shared by the networked stores: tether's own query parameters, and
passwords kept out of every message and display."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def take_param(url: str, name: str) -> tuple[str, str | None]:
    """(the URL without query parameter ``name``, its last value or None).

    Tether's own parameters (``schema``, ``prefix``) must not reach the driver, which would
    reject or misread them.
    """
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    given = [value for key, value in pairs if key == name]
    rest = urlencode([(key, value) for key, value in pairs if key != name])
    return urlunsplit(parts._replace(query=rest)), (given[-1] if given else None)
