"""Independent jobs on the machine's second core: this process and one forked child at once.

A migration's verification and check run the CUDA interpreter (and the NKI emulator) at five
or more size sets, one after the other, each run independent of the others: on two cores half
of them can run in a child. `fork` gives the child everything this process has built (the
parsed program, its memos, the probe values) at no cost; the child sends its results back
pickled, and the entries it added to the memos named by the caller, so that later phases (the
check after the verification) find those runs as if they had run here.

Nothing about a result depends on where it ran: every job is a pure function of its item (the
interpreter and the emulator are deterministic, inputs are drawn from seeds). A job that fails
in the child is run again here, so that its exception (and traceback) is the one a sequential
run would raise. Sequential where forking is not possible or would not pay: one core, one job,
threads running (a fork copies their locks held), inside a child already, or `C2N_WORKERS=1`.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_IN_CHILD = False  # this process is a child: its jobs run in it, one after the other
_BUSY = False  # a child is running: jobs nested in this process's share do not fork again


def workers() -> int:
    """Processes a batch of jobs may use: `C2N_WORKERS` where set, else the CPUs this process
    may run on, at most 2 (one child: more would not pay for what each fork copies)."""
    env = os.environ.get("C2N_WORKERS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


def _can_fork() -> bool:
    return (
        hasattr(os, "fork")
        and not _IN_CHILD
        and not _BUSY
        and workers() > 1
        and threading.active_count() == 1
    )


def map_jobs(
    fn: Callable[[T], R],
    items: Sequence[T],
    memos: Sequence[MutableMapping[Any, Any]] = (),
    work: Sequence[float] | None = None,
) -> list[R]:
    """`[fn(x) for x in items]`. The first item runs here; where the items left would take
    long enough at its pace (`FORK_AFTER` seconds), they are computed by this process and a
    forked child at once (`map_shared`), else here one after the other: a fork, the child's
    caches made again and its results sent back cost some tens of milliseconds, more than a
    batch of quick runs saves (a cross-entropy's measurement runs of a few milliseconds each
    took a third longer on two processes). Running one item first also fills what the others
    share (the probe values, the parsed program's memos) before the fork. `work`: each item's
    relative cost where the caller knows it (a run's sizes): the pace is per unit of work
    then, not per item (a cheap first size set hid the cost of ten times larger ones)."""
    items = list(items)
    weights = [max(float(w), 1e-9) for w in work] if work is not None else [1.0] * len(items)
    if len(weights) != len(items):
        raise ValueError("map_jobs: one work figure per item")
    done: list[R] = []
    after = _fork_after()
    t0 = time.perf_counter()
    for i, x in enumerate(items):
        left = len(items) - i
        if i and left >= 2:
            pace = (time.perf_counter() - t0) / sum(weights[:i])
            if pace * sum(weights[i:]) >= after:
                return done + map_shared(fn, items[i:], memos)
        done.append(fn(x))
    return done


FORK_AFTER = 0.2  # seconds of work left, at the pace so far, that pay for a second process


def _fork_after() -> float:
    """`FORK_AFTER`, or `C2N_FORK_AFTER` where set (0: every batch shared, as the tests that
    compare one process with two need)."""
    return seconds_setting("C2N_FORK_AFTER", FORK_AFTER)


def seconds_setting(name: str, default: float) -> float:
    """A threshold in seconds from the environment variable `name`, else `default` (also
    where it is no number)."""
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def map_shared(
    fn: Callable[[T], R],
    items: Sequence[T],
    memos: Sequence[MutableMapping[Any, Any]] = (),
) -> list[R]:
    """`[fn(x) for x in items]`, computed by this process and a forked child at once from the
    first item on, each taking the next item not yet taken (a queue of one-byte tokens in a
    pipe: runs differ in cost severalfold, so a fixed split would leave one core idle); one
    after the other here where no child can be forked. For a caller that knows each item is
    costly (`map_jobs` first times one here). Entries the child's jobs added to `memos` (dicts
    this process shares with it) are added here too."""
    items = list(items)
    child = _fork(fn, items, memos) if 2 <= len(items) <= MAX_ITEMS else None
    if child is None:
        return [fn(x) for x in items]
    mine, theirs = child.finish(lambda i: fn(items[i]))
    out = []
    for i, x in enumerate(items):
        if i in mine:
            out.append(mine[i])
        else:  # the child's result; one it failed (or never reported) is computed here
            ok, r = theirs.get(i, (False, None))
            out.append(r if ok else fn(x))
    return out


MAX_ITEMS = 255  # (one byte per token)


class Ahead:
    """A forked child taking `items` from a queue of one-byte tokens (`_fork`), while this
    process does other work or takes them too; `finish` collects its results and what its
    jobs added to the memos, `cancel` stops it. Started by `ahead`, only the memo entries
    are wanted (`join`): a later phase makes the same calls and finds them done."""

    def __init__(self, fn: Callable[[Any], Any], items: list[Any],
                 memos: Sequence[MutableMapping[Any, Any]], pid: int, queue: int,
                 back: int, status: int) -> None:  # fmt: skip
        self.fn, self.items, self.memos = fn, items, memos
        self.pid, self.queue, self.back, self.status = pid, queue, back, status
        self.open = True
        self.records = b""  # what the child has written to the status pipe so far

    def finish(
        self, run: Callable[[int], Any]
    ) -> tuple[dict[int, Any], dict[int, tuple[bool, Any]]]:
        """The items the child has not taken, computed here by `run(i)`, then the child's
        results ((ok, result) by item), its memo entries copied into the memos. An exception
        of `run` stops the child (its work is not wanted) and propagates."""
        if not self.open:
            return {}, {}
        payload = b""
        try:
            mine = {i: run(i) for i in _taken(self.queue)}
            with os.fdopen(self.back, "rb") as f:
                self.back = -1
                payload = f.read()
            os.waitpid(self.pid, 0)
            self.pid = -1
        finally:
            self._close()
        try:
            theirs, added = pickle.loads(payload)
        except Exception:  # the child died before it wrote (killed, out of memory)
            return mine, {}
        for memo, new in zip(self.memos, added, strict=False):
            for k, v in new.items():
                memo.setdefault(k, v)
        return mine, theirs

    def join(self, wanted: Callable[[Any], bool] | None = None) -> None:
        """`finish`, the items left run here for their memo entries alone (a failure is
        left for the phase that needs the job: it runs it again, and raises there). With
        `wanted`, items started ahead on a guess: those left that it rejects are not run,
        and one the child is running is abandoned (its memo entries are then not made)."""

        def run(i: int) -> None:
            if wanted is None or wanted(self.items[i]):
                with contextlib.suppress(Exception):
                    self.fn(self.items[i])

        if wanted is not None and self.open:
            for i in _taken(self.queue):  # (the child takes no item after this)
                run(i)
            running = _running(self._records())
            if running is not None and not wanted(self.items[running]) and self.pid > 0:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, ABANDON)
        self.finish(run)

    def busy_with(self, wanted: Callable[[Any], bool]) -> bool:
        """Whether the child is running an item `wanted` accepts (a `join` would wait for
        it; one it rejects, the join abandons at once)."""
        if not self.open:
            return False
        running = _running(self._records())
        return running is not None and wanted(self.items[running])

    def idle(self) -> bool:
        """Whether the child has finished every item (its results wait to be joined): the
        second core is free, and `join` returns at once."""
        if not self.open:
            return True
        done = self._records()[0::2].count(b"f")
        return done == len(self.items)

    def _records(self) -> bytes:
        """The status records the child has written so far (read without waiting)."""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self.status, 4096):
                self.records += chunk
        return self.records

    def cancel(self) -> None:
        """The child's work is not wanted (the phase that needed it never came): stopped."""
        if self.open:
            self._close()

    def _close(self) -> None:
        global _BUSY
        _BUSY = False
        self.open = False
        if self.pid > 0:
            _stop(self.pid)
            self.pid = -1
        for fd in (self.queue, self.back, self.status):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.queue = self.back = self.status = -1


ABANDON = signal.SIGUSR1  # the parent's word to a child that the item it runs is not wanted


class _Abandoned(BaseException):
    """Raised in a child, within the item it runs, when the parent sends ABANDON (not an
    Exception: no handler of the job's own takes it for one of its failures)."""


def _running(records: bytes) -> int | None:
    """The item the child has started and not finished, from the two-byte records (b"s" or
    b"f", item) it has written to the status pipe so far; None when it runs none."""
    started: set[int] = set()
    for k in range(0, len(records) - 1, 2):
        (started.add if records[k : k + 1] == b"s" else started.discard)(records[k + 1])
    return next(iter(started), None)


def ahead(
    fn: Callable[[T], Any], items: Sequence[T], memos: Sequence[MutableMapping[Any, Any]]
) -> Ahead | None:
    """`fn` of each item started now in a forked child, while this process goes on (a
    migration's fit, say, on one core, and the runs its verification will need on the
    other); `join` collects them. None where no child can be forked (then nothing runs
    ahead). Until the join, batches of this process run here alone (no second child)."""
    items = list(items)
    if not 1 <= len(items) <= MAX_ITEMS:
        return None
    # (the results are not sent back: only the memo entries are wanted)
    return _fork(lambda x: (fn(x), None)[1], items, memos)


def _fork(
    fn: Callable[[Any], Any], items: list[Any], memos: Sequence[MutableMapping[Any, Any]]
) -> Ahead | None:
    """A child forked to take `items` from the queue and compute `fn` of each; None where
    none can be (one core, a child running, threads, no pipe or no memory for the fork)."""
    global _BUSY
    if not _can_fork():
        return None
    try:
        queue_r, queue_w = os.pipe()
        os.write(queue_w, bytes(range(len(items))))  # (< PIPE_BUF: written at once)
        os.close(queue_w)
        back_r, back_w = os.pipe()
        status_r, status_w = os.pipe()  # (two bytes per item started or finished: never full)
        os.set_blocking(status_r, False)
    except OSError:
        return None
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:  # (no memory for the copy, or a sandbox that forbids it)
        for fd in (queue_r, back_r, back_w, status_r, status_w):
            os.close(fd)
        return None
    if pid == 0:  # the child: never returns
        os.close(back_r)
        os.close(status_r)
        _child(fn, items, memos, queue_r, back_w, parent, status_w)
    os.close(back_w)
    os.close(status_w)
    _BUSY = True
    return Ahead(fn, items, memos, pid, queue_r, back_r, status_r)


def _taken(queue: int) -> Iterator[int]:
    """The items this process takes from the queue, until it is empty. A one-byte read from a
    pipe is atomic: the two processes never take the same item."""
    while True:
        b = os.read(queue, 1)
        if not b:
            return
        yield b[0]


def _child(
    fn: Callable[[Any], Any],
    items: list[Any],
    memos: Sequence[MutableMapping[Any, Any]],
    queue: int,
    fd: int,
    parent: int,
    status_fd: int,
) -> None:
    global _IN_CHILD
    _IN_CHILD = True
    status = 0
    running = [False]

    def abandon(signum: int, frame: Any) -> None:
        if running[0]:  # (between items there is nothing to abandon)
            raise _Abandoned

    try:
        _die_with_parent(parent)
        signal.signal(ABANDON, abandon)
        before = [set(m) for m in memos]
        results: dict[int, tuple[bool, Any]] = {}
        for i in _taken(queue):
            _note(status_fd, b"s", i)
            running[0] = True
            try:
                results[i] = (True, fn(items[i]))
            except BaseException:  # (run again in the parent, which raises it there)
                results[i] = (False, None)
            finally:
                running[0] = False
            _note(status_fd, b"f", i)
        added = [{k: m[k] for k in m if k not in b} for m, b in zip(memos, before, strict=True)]
        try:
            data = pickle.dumps((results, added), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a result that does not pickle: the parent computes them
            data = pickle.dumps(({}, [{} for _ in memos]))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        status = 1
    finally:
        # (no atexit handlers, no flushing of the parent's buffered output, no test teardown)
        os._exit(status)


def _note(fd: int, what: bytes, i: int) -> None:
    """A child's record of an item started (b"s") or finished (b"f"), for `_running`."""
    with contextlib.suppress(OSError):
        os.write(fd, what + bytes([i]))


def _die_with_parent(parent: int) -> None:
    """Linux: the child is killed when the parent dies (a timeout that kills the migration
    must not leave its child running)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, ImportError):
        return
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
