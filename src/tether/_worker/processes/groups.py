"""Process groups: a pool child and every process its handlers start end together.

A handler may start subprocesses (ffmpeg, rsync, a payment CLI). Killing only the child that
ran it leaves them running, writing side effects for an attempt whose outcome is already
decided (timed out, cancelled, its lease lost) or whose worker is gone. So each child leads a
process group of its own (it is started in a new session, whose id is its pid) and inherits
nothing else into it; every signal the worker sends a child goes to the whole group, and once a
child has exited the worker SIGKILLs what is left of its group before reaping it.

Two rules keep that safe and complete:

* **A group is signalled only while its leader is unreaped.** The group's id is the child's
  pid; after the child is reaped, that number may name another process (and, through
  ``setsid``, its group). So the worker waits for the child's exit *without* reaping it
  (:func:`wait_exited`), kills the group, then reaps.
* **A child whose worker died ends its group itself.** Nobody else will: ``PR_SET_PDEATHSIG``
  signals only the child. The child watches its parent (:func:`watch_parent`: a thread
  blocked on a pidfd) and SIGKILLs its own group, itself included, the moment the parent is
  gone. That thread needs the GIL, which a handler inside a C call may hold for as long as
  the call lasts (issue #22: such a handler outlived its killed worker and ran beside the
  job's next attempt). So the child also forks, before it starts any thread or imports the
  app, a *guard* (:func:`guard_group`): a process of the group, holding nothing of the
  child's (no pipe, no stdio), blocked on pidfds of the worker and of the child. It SIGKILLs
  the group when the worker is gone, and exits when the child is.

What escapes: a process that leaves the group on purpose (``setsid``, ``setpgid``, a
double-forked daemon) is no longer the child's; docs/guarantees.md says so.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from typing import NoReturn

from tether import _clock as clock

__all__ = ["end_own_group", "guard_group", "kill_group", "orphaned", "wait_exited",
           "watch_parent"]

#: Exit status of a child that found its worker gone.
PARENT_GONE = 70
_PR_SET_PDEATHSIG = 1


def kill_group(pgid: int, sig: int) -> None:
    """Signal every process of group ``pgid``; nothing if the group is gone. The caller makes
    sure the group's leader is not reaped yet (see the module's rules)."""
    try:
        os.killpg(pgid, sig)
    except OSError:  # ESRCH: nobody left; EPERM: not ours (never the case for our children)
        pass


def wait_exited(pid: int, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: no limit) for child ``pid`` to exit, without
    reaping it, so its pid (and group id) stays ours; True once it has exited."""
    fd = _pidfd(pid)
    if fd is not None:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))
        finally:
            os.close(fd)
    deadline = None if timeout is None else clock.monotonic() + timeout
    delay = 0.0005
    while True:  # no pidfd (an old kernel): poll, as subprocess's own wait(timeout) does
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return True
        except ChildProcessError:  # already reaped
            return True
        if deadline is not None and clock.monotonic() >= deadline:
            return False
        clock.sleep(delay)
        delay = min(delay * 2, 0.05)


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


# -- the child's side ----------------------------------------------------------------------
def end_own_group() -> NoReturn:
    """SIGKILL this process's group, this process included, if it leads it (a pool child
    does); otherwise just exit. Never returns."""
    if os.getpgrp() == os.getpid():
        kill_group(os.getpgrp(), signal.SIGKILL)
    os._exit(PARENT_GONE)


def orphaned(parent: int) -> bool:
    """Whether the worker ``parent`` that started this process is gone."""
    return os.getppid() != parent


def watch_parent(parent: int) -> None:
    """End this process and its group when ``parent`` dies (at once if it already has).

    A daemon thread blocks on a pidfd of the parent, which becomes readable once the whole
    worker process is gone, and calls :func:`end_own_group`: it works while the main thread
    runs a handler, even one blocked in C that released the GIL. (A call that holds the GIL
    delays it until the call returns: docs/guarantees.md.)

    ``PR_SET_PDEATHSIG`` cannot do this: with SIGKILL it ends the child before the child can
    end its group, and with a catchable signal it cannot tell the worker's death from the
    end of the worker *thread* that started the child (the kernel signals on a thread's
    exit, while ``getppid()`` still names the dying worker). It remains the fallback, with
    SIGKILL, where pidfds are missing (Linux before 5.3): the child then dies with its worker
    but a handler's subprocesses may not."""
    fd = _pidfd(parent)
    if fd is None:
        _death_signal(signal.SIGKILL)
    if orphaned(parent):  # checked after opening: the pidfd names the parent, not a reuse
        end_own_group()
    if fd is None:
        return

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(None):
            pass
        end_own_group()

    threading.Thread(target=watch, name="tether-parent-watch", daemon=True).start()


def guard_group(parent: int) -> int | None:
    """Fork this child's guard (see the module doc); returns its pid, None when it cannot
    (no pidfds or no fork: :func:`watch_parent` alone then). Call it first thing, while the
    process has one thread: a fork copies only the calling thread."""
    me = os.getpid()
    if os.getpgrp() != me or not hasattr(os, "fork"):
        return None  # not a group leader: the group is not ours to end
    parent_fd = _pidfd(parent)
    own_fd = _pidfd(me) if parent_fd is not None else None
    if parent_fd is None or own_fd is None:
        if parent_fd is not None:
            os.close(parent_fd)
        return None
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        _guard(parent_fd, own_fd)
    os.close(parent_fd)
    os.close(own_fd)
    return pid if pid > 0 else None


def _guard(parent_fd: int, child_fd: int) -> NoReturn:
    """The guard's whole life: hold nothing of the child's, wait for the worker's or the
    child's end, and on the worker's SIGKILL the group. Never returns."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a stop of the group ends it too
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = {0, 1, 2, parent_fd, child_fd}
        for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
            fd = int(name)
            if fd not in keep:  # the child's pipes above all: its worker must see their EOF
                try:
                    os.close(fd)
                except OSError:
                    pass
        poller = select.poll()
        poller.register(parent_fd, select.POLLIN)
        poller.register(child_fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll(None)}
            if parent_fd in ready:  # the worker is gone: its child's handlers must go too
                kill_group(os.getpgrp(), signal.SIGKILL)
            if ready:
                break
    finally:
        os._exit(0)


def _death_signal(sig: signal.Signals) -> None:
    """Ask the kernel to send ``sig`` when the parent (thread) dies (Linux only)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(sig))
        except (OSError, AttributeError):  # pragma: no cover - exotic libc
            pass
