"""The bound statements are minified (statements.py): comments and whitespace go, quoted text
stays exactly, and every statement psycopg rewrites per call fits its 4096-byte cache."""

from __future__ import annotations

import re

from tether.stores._postgres import statements

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def _code(text: str) -> str:
    """The text outside comments (the .sql files' comments hold no statement text)."""
    return "\n".join(line.split("--", 1)[0] if "'" not in line.split("--", 1)[0] else line
                     for line in text.splitlines())


def test_no_quoting_the_minifier_does_not_know() -> None:
    for name, text in statements.TEMPLATES.items():
        code = _code(text)
        assert "$$" not in code and "/*" not in code, name
        assert not re.search(r"\b[eE]'", code), name


def test_comments_and_line_breaks_go() -> None:
    bound = statements.for_schema("tether_x")
    for name in statements.TEMPLATES:
        code = _QUOTED.sub("Q", bound[name])
        assert "--" not in code and "\n" not in code and "  " not in code, name


def test_minified_keeps_literals_with_dashes_and_quotes() -> None:
    text = "SELECT 'a -- b', 'it''s',  \"x\"\"y\" -- gone\n  FROM t -- gone 'too'\nWHERE a - b > 1"
    assert statements.minified(text) == (
        "SELECT 'a -- b', 'it''s', \"x\"\"y\" FROM t WHERE a - b > 1")


def test_finish_fits_psycopgs_statement_cache() -> None:
    bound = statements.for_schema("tether_x")
    assert len(bound["finish"].encode()) <= 4096
