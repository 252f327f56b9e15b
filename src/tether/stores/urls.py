"""Store URL helpers shared by the networked stores: tether's own query parameters, and
passwords kept out of every message and display."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: ``password=…`` (and its spellings) as a query parameter or in a key=value DSN.
_SECRET_PARAM = re.compile(
    r"(?i)(^|[?&;\s])((?:ssl_?)?(?:password|passwd|pwd)=)('[^']*'|[^&;\s]*)"
)


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``: in the netloc (``user:pw@``) and in
    ``password=`` parameters. Works on URLs that do not parse (a bad port), since those are
    exactly the ones that end up in error messages."""
    start = url.find("://")
    if start >= 0:
        start += 3
        end = len(url)
        for sep in "/?#":
            found = url.find(sep, start)
            if found >= 0:
                end = min(end, found)
        netloc = url[start:end]
        userinfo, at, hostport = netloc.rpartition("@")
        if at and ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            url = f"{url[:start]}{user}:***@{hostport}{url[end:]}"
    return _SECRET_PARAM.sub(r"\1\2***", url)


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
