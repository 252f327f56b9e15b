"""Codecs: how Python values become the JSON a job carries, and come back as the right type.

Invariant: JSON stays the wire format. A codec turns a value into plain JSON values (``None``,
``bool``, ``int``, ``float``, ``str``, lists, dicts with string keys) before
:mod:`tether._payload` writes the text, and turns plain JSON back into a value of a given type.
Nothing is ever pickled: a queue row must not be able to run code in the worker that reads it.

Decoding is driven by types, not by tags inside the JSON: the worker decodes a handler's
arguments by its parameters' annotations and ``App.wait`` a result by the handler's return
annotation. So the JSON stays readable by producers in other languages and by ``tether job``,
and a value without an annotation comes back as plain JSON, as it always did.

A custom codec is any object with the two methods of :class:`Codec`, passed as
``App(codec=...)``. It may refuse a value with ``TypeError`` (at enqueue: nothing is written).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import sys
import types
import typing
from collections import abc
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from tether import _payload as payload
from tether._limits import check_json_text

__all__ = ["Codec", "JSONCodec"]

_PLAIN = (str, int, float, bool, type(None))


@runtime_checkable
class Codec(Protocol):
    """What ``App(codec=...)`` takes.

    ``encode(value)`` returns plain JSON values (or raises ``TypeError`` naming what it cannot
    carry); ``decode(value, type)`` turns the plain JSON back into ``type``, where ``type`` is
    an annotation (``typing.Any`` when there is none: return the value as it is).
    """

    def encode(self, value: Any) -> Any: ...

    def decode(self, value: Any, type_: Any) -> Any: ...


def _pydantic_base() -> type | None:
    """pydantic's BaseModel once the program has imported pydantic (v2), else None.

    Never imports it: a model instance or a model class in an annotation can only exist after
    pydantic was imported by whoever defined it, and importing it here cost every worker and
    producer ~60 ms of start-up although most never carry a model (issue #10)."""
    module = sys.modules.get("pydantic")
    if module is None:
        return None
    try:
        base = module.BaseModel
    except (AttributeError, ImportError):  # v1, or still being imported by another thread
        return None
    return base if isinstance(base, type) and hasattr(base, "model_validate") else None


class JSONCodec:
    """The default codec: plain JSON, plus datetime (timezone-aware only), date, time,
    timedelta (seconds), UUID, Decimal (as a string, so no precision is lost), enums,
    dataclasses, tuples/sets (as lists) and pydantic v2 models (when pydantic is installed).
    """

    def __init__(self) -> None:
        self._pydantic: type | None = None  # found on first need: see _pydantic_base
        self._encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                         separators=(",", ":"), default=self._default)
        #: json's C encoder made once (issue #23): ``JSONEncoder.encode`` builds a new one,
        #: and a closure, on every call, which cost four times the encoding of a short
        #: payload. No cycle markers, so it keeps no state between calls (threads share it);
        #: a value that refers to itself ends in RecursionError, refused as TypeError by
        #: to_text like any value JSON cannot write. None where json has no C encoder.
        self._fast: Any = None if _c_make_encoder is None else _c_make_encoder(
            None, self._default, encode_basestring, None, ":", ",", False, False, False)

    def _model_base(self) -> type | None:
        if self._pydantic is None:
            self._pydantic = _pydantic_base()
        return self._pydantic

    # -- encoding ---------------------------------------------------------------------------
    def encode(self, value: Any) -> Any:
        return self._encode(value, 0)

    def dumps(self, value: Any) -> str:
        """``encode`` and JSON text in one pass of the C encoder (the enqueue hot path); only
        values JSON cannot write reach :meth:`_default`. Same result as ``encode`` then
        ``json.dumps``."""
        if self._fast is None or isinstance(value, str):
            return self._encoder.encode(value)
        return "".join(self._fast(value, 0))

    def _default(self, value: Any) -> Any:
        """One level of :meth:`encode` for a value JSON cannot write; the encoder recurses."""
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, set | frozenset):
            return list(value)
        if isinstance(value, Mapping):
            return dict(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return self._encode(value, 0)

    def _encode(self, value: Any, depth: int) -> Any:
        if depth > 200:
            raise TypeError("the value is nested too deeply (or refers to itself)")
        if isinstance(value, _PLAIN) and not isinstance(value, enum.Enum):
            return value
        if isinstance(value, enum.Enum):
            return self._encode(value.value, depth + 1)
        if isinstance(value, datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise TypeError(
                    f"naive datetime {value.isoformat()} has no timezone: pass an aware one "
                    "(e.g. datetime.now(timezone.utc)) so every worker reads the same instant")
            return value.isoformat()
        if isinstance(value, date | time):
            return value.isoformat()
        if isinstance(value, timedelta):
            return value.total_seconds()
        if isinstance(value, UUID | Decimal):
            return str(value)
        if isinstance(value, list | tuple | set | frozenset):
            return [self._encode(v, depth + 1) for v in value]
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for k, v in value.items():
                out[_key(k)] = self._encode(v, depth + 1)
            return out
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self._encode(getattr(value, f.name), depth + 1)
                    for f in dataclasses.fields(value)}
        if (model := self._model_base()) is not None and isinstance(value, model):
            return value.model_dump(mode="json")  # type: ignore[attr-defined]
        raise TypeError(f"cannot carry a {type(value).__module__}.{type(value).__qualname__} "
                        "as JSON (use plain values, datetime, date, UUID, Decimal, enums, "
                        "dataclasses or pydantic models, or give App a codec that can)")

    # -- decoding ---------------------------------------------------------------------------
    def decode(self, value: Any, type_: Any) -> Any:
        """``value`` as ``type_``; ValueError/TypeError when it cannot be one."""
        if type_ is Any or type_ is None or type_ is object or isinstance(type_, typing.TypeVar):
            return value
        if type_ is type(None):
            return value
        origin = typing.get_origin(type_)
        if origin is typing.Annotated:
            return self.decode(value, typing.get_args(type_)[0])
        if origin is typing.Union or origin is types.UnionType:
            return self._union(value, typing.get_args(type_))
        if origin is typing.Literal:
            return value
        if origin is not None:
            return self._generic(value, origin, typing.get_args(type_))
        if not isinstance(type_, type):  # NewType, string forward refs left unresolved, ...
            return value
        return self._simple(value, type_)

    def _simple(self, value: Any, cls: type) -> Any:
        if cls is bool or cls is str or cls is int:  # never handed on as another type:
            return _checked(value, cls)  # wait() would return it typed as what it is not
        if cls is float:
            if isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            return _checked(value, float)
        if issubclass(cls, enum.Enum):
            return cls(value)
        if issubclass(cls, datetime):
            found = cls.fromisoformat(value)
            if found.utcoffset() is None:  # as encode refuses it: the instant is unknown
                raise ValueError(f"naive datetime {value!r} has no timezone")
            return found
        if issubclass(cls, date):
            return cls.fromisoformat(value)
        if issubclass(cls, time):
            return cls.fromisoformat(value)
        if issubclass(cls, timedelta):
            return cls(seconds=value)
        if issubclass(cls, UUID):  # UUID(5) is an AttributeError, which no union arm expects
            return cls(_checked(value, str))
        if issubclass(cls, Decimal):
            return cls(str(value))
        if dataclasses.is_dataclass(cls):
            if not isinstance(value, dict):
                raise TypeError(f"expected an object for {cls.__name__}, got {value!r}")
            hints = _hints(cls)
            known = {f.name for f in dataclasses.fields(cls) if f.init}
            fields = {k: self.decode(v, hints.get(k, Any)) for k, v in value.items()
                      if k in known}
            return cls(**fields)
        if (model := self._model_base()) is not None and issubclass(cls, model):
            return cls.model_validate(value)  # type: ignore[attr-defined]
        if cls in (list, dict, tuple, set, frozenset):
            return cls(value)
        return value

    def _generic(self, value: Any, origin: Any, args: tuple[Any, ...]) -> Any:
        if origin is dict or origin in _MAPPINGS:
            _checked(value, dict)
        elif origin in _SETS or origin is list or origin in _SEQUENCES or origin is tuple:
            _checked(value, list)  # JSON has no other sequence (a str would iterate chars)
        if origin in _SETS:
            item = args[0] if args else Any
            items = [self.decode(v, item) for v in value]
            return frozenset(items) if origin is frozenset else set(items)
        if origin is list or origin in _SEQUENCES:
            item = args[0] if args else Any
            return [self.decode(v, item) for v in value]
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(self.decode(v, args[0]) for v in value)
            if args and len(args) == len(value):
                return tuple(self.decode(v, t) for v, t in zip(value, args, strict=True))
            return tuple(value)
        if origin is dict or origin in _MAPPINGS:
            key, item = args if len(args) == 2 else (Any, Any)
            if key in _JSON_KEYS:  # written as JSON text by _key: read back the same way
                return {self.decode(json.loads(k), key): self.decode(v, item)
                        for k, v in value.items()}
            return {k: self.decode(v, item) for k, v in value.items()}
        return value

    def _union(self, value: Any, arms: tuple[Any, ...]) -> Any:
        if value is None and type(None) in arms:
            return None
        errors = []
        for arm in arms:
            if arm is type(None):
                continue
            try:
                return self.decode(value, arm)
            except (TypeError, ValueError, ArithmeticError) as exc:
                errors.append(f"{getattr(arm, '__name__', arm)}: {exc}")
        raise ValueError(f"{value!r} fits none of {', '.join(errors)}")


def _checked(value: Any, cls: type) -> Any:
    """``value`` when it is a ``cls`` (what JSON carries for it), else TypeError."""
    if not isinstance(value, cls):
        raise TypeError(f"expected {cls.__name__}, got {type(value).__name__} {value!r:.100}")
    return value


_SETS: frozenset[Any] = frozenset({set, frozenset, abc.Set, abc.MutableSet})
_SEQUENCES: frozenset[Any] = frozenset({abc.Sequence, abc.MutableSequence, abc.Iterable,
                                        abc.Collection})
_MAPPINGS: frozenset[Any] = frozenset({abc.Mapping, abc.MutableMapping})


#: Key annotations whose keys JSON writes as their JSON text (``1`` -> ``"1"``).
_JSON_KEYS: frozenset[Any] = frozenset({int, float, bool})


def _key(key: Any) -> str:
    """A dict key as JSON writes it (numbers, booleans and None become their JSON text)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool | int | float) or key is None:
        return json.dumps(key)
    raise TypeError(f"dict keys must be str, int, float, bool or None, got "
                    f"{type(key).__name__} {key!r}")


#: Annotations whose values the default codec decodes as they are (plain JSON already).
_AS_IS: frozenset[Any] = frozenset({Any, object, str, int, bool, type(None), list, dict})


def decodes_as_is(hint: Any) -> bool:
    """True when :class:`JSONCodec` would return any JSON value of type ``hint`` unchanged
    (``int``, ``dict[str, list[str]]``, ``str | None``...): the worker then skips decoding,
    and with it the type check of such arguments (the hot path of plain jobs; a handler then
    gets what the producer sent, as before there were codecs). Results are always checked."""
    if hint in _AS_IS:
        return True
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is dict and args and args[0] in _JSON_KEYS:  # "1" must come back as 1
        return False
    if origin in (list, dict, typing.Union, types.UnionType):
        return all(decodes_as_is(a) for a in args)
    return False


def _hints(obj: Any) -> dict[str, Any]:
    """``typing.get_type_hints`` that never fails: unresolvable annotations count as Any."""
    try:  # a wrapper (functools.wraps, tracing) resolves names in the wrapped one's module
        return typing.get_type_hints(inspect.unwrap(obj), include_extras=True)
    except Exception:
        return {}


def type_hints(obj: Any) -> dict[str, Any]:
    """The resolved annotations of a function or class (empty when they cannot be resolved,
    so a bad annotation means plain JSON, never a worker error)."""
    return _hints(obj)


def to_text(codec: Codec, value: Any, what: str) -> str:
    """``value`` through ``codec`` to JSON text; every refusal is one TypeError naming ``what``
    (the codec's own, JSON's, or the input limits')."""
    fast = isinstance(codec, JSONCodec) and type(codec).encode is JSONCodec.encode
    try:
        if fast:  # the default codec: encoded and written in one pass
            text = codec.dumps(value)  # type: ignore[attr-defined]
        else:
            plain = codec.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"{what} must be JSON-serializable: {exc}") from None
    return check_json_text(text, what) if fast else payload.dumps(plain, what)


def from_text(codec: Codec, text: str | None, type_: Any = Any) -> Any:
    """JSON text back through ``codec`` as ``type_`` (None stays None)."""
    if text is None:
        return None
    return codec.decode(json.loads(text), type_)


#: The codec of an App made without ``codec=``.
DEFAULT_CODEC: Codec = JSONCodec()
