"""Independent pieces of a migration's work on a second core: a forked child computes the
later items of a list while this process computes the first ones.

A migration's check runs the NKI kernel (and, where no earlier run is remembered, the CUDA
original) at every size set, each independent of the others; on a machine with two cores the
second can take some of them. The child is a fork: it starts with everything this process has
loaded and remembered (the parsed source, the kernel module, the runs already made), and
sends its results back pickled. Whatever keeps it from helping (no `os.fork`, one core, other
threads running, `C2N_JOBS=1`, a fork refused, a child that fails) makes the work run here,
one item after another, exactly as without it: the results are the same either way.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_IN_CHILD = False  # a forked child does its share itself (no forks of forks)


def in_child() -> bool:
    """Whether this process is a forked helper (its share's side effects stay in it)."""
    return _IN_CHILD


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS says)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether a forked helper may take part: a second core, `os.fork`, no other thread
    (a fork copies only the calling thread, and locks another one holds stay held), and not
    switched off (`C2N_JOBS=1`)."""
    if _IN_CHILD or not hasattr(os, "fork") or os.environ.get("C2N_JOBS", "") == "1":
        return False
    return available_cores() >= 2 and threading.active_count() == 1


def map_split(fn: Callable[[T], R], items: Sequence[T], here: int) -> list[R]:
    """`[fn(x) for x in items]`, the first `here` items computed in this process and the rest
    in a forked child at the same time (where `can_fork`). `fn` must be a function of its
    item alone (what it changes in this process, a memo, the child's share does not change),
    and its results picklable."""
    items = list(items)
    if not 0 < here < len(items) or not can_fork():
        return [fn(x) for x in items]
    rest = items[here:]
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    try:
        pid = os.fork()
    except Exception:  # (refused: a sandbox's audit hook, no memory for the page tables)
        os.close(read)
        os.close(write)
        return [fn(x) for x in items]
    if pid == 0:  # the child: its share, sent back whole, then gone without cleanup
        global _IN_CHILD
        _IN_CHILD = True
        os.close(read)
        code = 0
        try:
            payload = pickle.dumps(("ok", [fn(x) for x in rest]))
        except BaseException as e:  # noqa: BLE001 (any failure: the parent redoes the share)
            payload, code = pickle.dumps(("failed", repr(e)[:500])), 1
        try:
            with os.fdopen(write, "wb") as f:
                f.write(payload)
        finally:
            os._exit(code)
    os.close(write)
    done = False
    try:
        mine = [fn(x) for x in items[:here]]
        with os.fdopen(read, "rb") as f:
            data = f.read()
        done = True
    finally:
        if not done:  # (this process failed first: the child's results are not wanted)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.close(read)
        os.waitpid(pid, 0)
    try:
        status, theirs = pickle.loads(data)
    except Exception:  # (a child killed half-way: nothing, or part of its results)
        status, theirs = "failed", None
    if status != "ok" or not isinstance(theirs, list) or len(theirs) != len(rest):
        # the share again, here: an error it raises is raised as it would be without a fork
        theirs = [fn(x) for x in rest]
    return mine + theirs
