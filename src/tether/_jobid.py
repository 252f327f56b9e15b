"""``JobId[R]``: a job's id that remembers, for the type checker, what its task returns.

It is an ``int`` at run time (``JobId(7) == 7``, it indexes, it formats, it goes to every store
call as is), so code that treats ids as ints keeps working; only ``app.wait`` and
``app.await_result`` read its type parameter, to type the result they return.
"""

from __future__ import annotations

from typing import Generic, TypeVar

R = TypeVar("R")

__all__ = ["JobId"]


class JobId(int, Generic[R]):
    """The id of a job whose handler returns ``R``."""

    __slots__ = ()  # prints, formats and pickles as the plain int it is
