"""The in-memory store, ``memory://NAME``: for tests and demos, one process only."""

from tether.stores._memory.store import MemoryStore

__all__ = ["MemoryStore"]
