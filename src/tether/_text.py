"""Error text that every store can hold, made the same way for all of them.

Invariant: an error message or traceback never stops an outcome from being written. Handlers
raise whatever they like: a NUL byte (PostgreSQL ``text`` refuses it), a lone surrogate from a
non-UTF-8 file name (no driver can encode it) or megabytes of text. :func:`clean_error` turns
any ``str`` into one that every store stores and returns unchanged, so the text a user reads
back is identical on SQLite, PostgreSQL and Redis. Stores apply it to every error they write;
the worker applies it first, so what it logs is what the store keeps.
"""

from __future__ import annotations

#: Longest error text kept per record (the traceback's tail is the useful part).
MAX_ERROR = 4000


def clean_error(text: str, limit: int = MAX_ERROR) -> str:
    """NUL -> ``\\x00``, lone surrogates -> ``\\udXXX``; at most ``limit`` characters."""
    if not isinstance(text, str):
        text = str(text)
    if not text.isascii() or "\x00" in text:
        text = text.replace("\x00", "\\x00")
        if not text.isascii():
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > limit:
        keep = limit - 20
        text = text[: keep // 2] + " [...] " + text[-(keep - keep // 2):]
    return text


def clean_optional(text: str | None) -> str | None:
    return None if text is None else clean_error(text)
