"""The process tree as /proc shows it: a process's children, a process group's members,
whether a process still runs.

Why one module: the crash tests (a handler's subprocesses must die with its attempt) and the
throwaway PostgreSQL (a killed postmaster leaves its backends running) both read
``/proc/<pid>/stat``; its second field, the command name, may hold spaces and parentheses, so
the fields are read after the last ``)``. Linux only, as the suite is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ...; None
    when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone (FileNotFoundError), or gone while being read
        return None
    return text.rsplit(")", 1)[1].split()


def _all() -> Iterator[tuple[int, list[str]]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(entry.name)
            if fields is not None:
                yield int(entry.name), fields


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    return [p for p, fields in _all() if int(fields[1]) == pid]


def in_group(pgid: int) -> list[int]:
    """The processes whose process group is ``pgid``."""
    return [p for p, fields in _all() if int(fields[2]) == pgid]


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a zombie runs nothing; whether it is reaped
    depends on the machine's init)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


__all__ = ["alive", "children", "in_group"]
