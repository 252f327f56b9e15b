"""JSON in, JSON out: the only wire format for arguments, results, checkpoints and progress.

Pickle is never used: a queue row must not be able to run code in the worker that reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.scanner import make_scanner
from typing import Any

from tether._limits import check_json_text

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
#: json's own C scanner, called directly: ``json.loads`` goes through two Python-level calls
#: and a whitespace regex first, which cost more than the scan of a short payload (every
#: job's arguments are decoded once per attempt, on the worker's hot path).
_scan: Callable[[str, int], tuple[Any, int]] = make_scanner(
    json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: the C scanner takes a decoder


def dumps(value: Any, what: str = "value") -> str:
    """Encode, turning every way JSON can refuse into one clear TypeError."""
    try:
        text = _encoder.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(
            f"{what} must be JSON-serializable (str, int, float, bool, None, list, dict with str "
            f"keys): {exc}"
        ) from None
    return check_json_text(text, what)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def encode_call(args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any], task: str) -> str:
    if not all(isinstance(k, str) for k in kwargs):
        raise TypeError(f"keyword argument names of {task} must be strings")
    return dumps([list(args), kwargs], f"arguments of {task}")


def decode_call(payload: str) -> tuple[list[Any], dict[str, Any]]:
    """``[args, kwargs]``, or ``[args, kwargs, meta]`` where ``meta`` is tether's own envelope
    (e.g. the trace context, see tether.tracing): it never reaches the handler."""
    args, kwargs, _ = decode_envelope(payload)
    return args, kwargs


def decode_envelope(payload: str) -> tuple[list[Any], dict[str, Any], dict[str, Any] | None]:
    """:func:`decode_call` and the envelope (None without one): one parse for both, as the
    worker needs the envelope's ``pipe`` (a workflow step's parent results) on every run."""
    try:
        value, end = _scan(payload, 0)
    except (StopIteration, TypeError):
        end = -1
    if end != len(payload):  # whitespace around it, or not JSON: json.loads says which
        value = json.loads(payload)
    if (
        not isinstance(value, list)
        or len(value) not in (2, 3)
        or not isinstance(value[0], list)
        or not isinstance(value[1], dict)
        or (len(value) == 3 and not isinstance(value[2], dict))
    ):
        raise ValueError("payload is not [args, kwargs]")
    return value[0], value[1], (value[2] if len(value) == 3 else None)


def meta(payload: str) -> dict[str, Any]:
    """The envelope of a payload (``{}`` when it has none)."""
    value = json.loads(payload)
    if isinstance(value, list) and len(value) == 3 and isinstance(value[2], dict):
        found: dict[str, Any] = value[2]
        return found
    return {}


def with_meta(payload: str, **entries: Any) -> str:
    """The payload with ``entries`` merged into its envelope; args and kwargs untouched.

    Why an envelope and not a kwarg or a new store column: the handler's arguments stay exactly
    what the producer passed, and every store carries it already (payloads are opaque text).
    """
    value = json.loads(payload)
    envelope = {**(value[2] if len(value) == 3 else {}), **entries}
    return dumps([value[0], value[1], envelope], "payload")
