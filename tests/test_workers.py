"""`migrator.workers.map_jobs`: results in item order whichever process ran them, the child's
memo entries copied back, failures raised as a sequential run raises them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import workers


@pytest.fixture
def two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("C2N_WORKERS", "2")  # (forks even where the machine has one core)
    # (and where an earlier test of the session left a thread behind: these jobs take no lock)
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    monkeypatch.setattr(workers, "FORK_AFTER", 0.0)  # (quick jobs shared too)


def test_results_come_back_in_item_order_and_some_ran_in_a_child(two: None) -> None:
    me = os.getpid()
    got = workers.map_jobs(lambda x: (x * x, os.getpid()), list(range(12)))
    assert [v for v, _ in got] == [x * x for x in range(12)]
    # (the child takes items as this process does: with a slow first item it takes some)
    slow = workers.map_jobs(
        lambda x: (__import__("time").sleep(0.2 if x == 0 else 0.01), os.getpid())[1], range(6)
    )
    assert me in slow and any(p != me for p in slow)


def test_memo_entries_made_in_the_child_are_copied_back(two: None) -> None:
    memo: dict[int, int] = {100: -1}

    def job(x: int) -> int:
        memo[x] = x + 1
        return x

    assert workers.map_jobs(job, list(range(8)), [memo]) == list(range(8))
    assert memo == {100: -1, **{x: x + 1 for x in range(8)}}


def test_a_job_that_raises_raises_here_with_its_own_exception(two: None) -> None:
    def job(x: int) -> int:
        if x == 3:
            raise KeyError("three")
        return x

    with pytest.raises(KeyError, match="three"):
        workers.map_jobs(job, list(range(6)))


def test_a_result_that_does_not_pickle_is_computed_here(two: None) -> None:
    got = workers.map_jobs(lambda x: lambda: x, list(range(5)))  # (lambdas do not pickle)
    assert [f() for f in got] == list(range(5))


def test_quick_jobs_stay_in_this_process_and_slow_ones_are_shared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first item runs here; the rest go to two processes only where, at its pace, they
    would take `FORK_AFTER` seconds or more (a fork costs tens of milliseconds)."""
    import time

    me = os.getpid()
    monkeypatch.setenv("C2N_WORKERS", "2")
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    assert workers.map_jobs(lambda x: os.getpid(), range(8)) == [me] * 8
    pids = workers.map_jobs(lambda x: (time.sleep(0.06), os.getpid())[1], range(8))
    assert pids[0] == me and any(p != me for p in pids)


def test_the_pace_is_per_unit_of_work_where_the_items_say_their_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cheap first item (the smallest size set) says little of ten times larger ones: with
    each item's work given, the rest are shared where their work at the first one's pace is
    `FORK_AFTER` seconds or more; where the work says they are as cheap, they stay here."""
    import time

    me = os.getpid()
    monkeypatch.setenv("C2N_WORKERS", "2")
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)

    def job(x: int) -> int:
        time.sleep(0.02 * x)
        return os.getpid()

    items = [1, 10, 10, 10]
    assert workers.map_jobs(job, items[:3]) == [me] * 3  # (per item: 2 x 0.02 s left)
    shared = workers.map_jobs(job, items, work=items)
    assert shared[0] == me and any(p != me for p in shared)
    assert workers.map_jobs(job, [1, 1, 1], work=[1, 1, 1]) == [me] * 3
    with pytest.raises(ValueError, match="one work figure per item"):
        workers.map_jobs(job, [1, 1], work=[1])


def test_one_worker_one_item_or_a_nested_batch_runs_in_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    me = os.getpid()
    monkeypatch.setenv("C2N_WORKERS", "1")
    assert workers.map_jobs(lambda x: os.getpid(), range(4)) == [me] * 4
    monkeypatch.setenv("C2N_WORKERS", "2")
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    monkeypatch.setattr(workers, "FORK_AFTER", 0.0)
    assert workers.map_jobs(lambda x: os.getpid(), [0]) == [me]

    # a batch inside a batch: no second fork (three processes on two cores would not pay)
    # (the first outer item runs alone, so its batch may share; the others ran while a child
    # was running, in it or beside it)
    def outer(x: int) -> list[int]:
        time.sleep(0.1)  # (so that each process takes one of the items left)
        return workers.map_jobs(lambda y: os.getpid(), range(3))

    inner = workers.map_jobs(outer, range(3))
    assert all(len(set(pids)) == 1 for pids in inner[1:])
    assert len({pids[0] for pids in inner[1:]}) == 2  # (the outer batch was shared)


def test_jobs_started_ahead_leave_their_memo_entries_at_the_join(two: None) -> None:
    """`ahead`: a child starts on the items while this process goes on; `join` runs here the
    items the child has not taken and copies the child's memo entries in."""
    import time

    memo: dict[int, int] = {}

    def job(x: int) -> None:
        time.sleep(0.02)
        memo[x] = os.getpid()

    me = os.getpid()
    pending = workers.ahead(job, range(6), [memo])
    assert pending is not None
    # meanwhile a batch of this process runs here alone (no second child beside the first)
    assert workers.map_jobs(lambda x: os.getpid(), range(4)) == [me] * 4
    pending.join()
    assert sorted(memo) == list(range(6)) and any(p != me for p in memo.values())
    slow = workers.map_jobs(lambda x: (time.sleep(0.05), os.getpid())[1], range(8))
    assert slow != [me] * 8  # (after the join, batches are shared again)


def test_work_started_ahead_and_not_wanted_is_stopped(two: None) -> None:
    import time

    memo: dict[int, int] = {}
    pending = workers.ahead(lambda x: (time.sleep(30), memo.setdefault(x, x)), [0], [memo])
    assert pending is not None
    pid = pending.pid
    t = time.perf_counter()
    pending.cancel()
    assert time.perf_counter() - t < 5 and memo == {}
    with pytest.raises(ChildProcessError):  # (stopped and reaped: no such child left)
        os.waitpid(pid, 0)
    pending.join()  # (after a cancel: nothing to collect)
    assert memo == {}


def _started(marker: Path) -> None:
    """Wait until a job in the child has written `marker` (it is inside that item)."""
    import time

    for _ in range(1000):
        if marker.exists():
            return
        time.sleep(0.01)
    raise AssertionError("the child never started the item")


def test_work_started_ahead_on_a_guess_is_abandoned_where_the_join_does_not_want_it(
    two: None, tmp_path: Path
) -> None:
    """`join(wanted)`: items started ahead on a guess that the phase then does not want are
    neither run here nor waited for: the child's item in progress is abandoned (and leaves no
    memo entry), the wanted ones' entries come back as before."""
    import time

    memo: dict[int, int] = {}

    def job(x: int) -> None:
        if x == 9:
            (tmp_path / "9").touch()
            time.sleep(30)
        memo[x] = x

    pending = workers.ahead(job, [1, 9, 2, 3], [memo])
    assert pending is not None
    _started(tmp_path / "9")  # (the child has run 1 and started 9)
    t = time.perf_counter()
    pending.join(lambda x: x != 9 and x != 3)
    assert time.perf_counter() - t < 5
    assert memo == {1: 1, 2: 2}  # (2 run here, 3 left: not wanted, 9 abandoned)


def test_a_join_waits_for_the_wanted_item_the_child_is_running(two: None, tmp_path: Path) -> None:
    import time

    memo: dict[int, int] = {}

    def job(x: int) -> None:
        if x == 0:
            (tmp_path / "0").touch()
            time.sleep(0.5)
        memo[x] = os.getpid()

    me = os.getpid()
    pending = workers.ahead(job, [0, 1, 2], [memo])
    assert pending is not None
    _started(tmp_path / "0")  # (the child is inside item 0)
    pending.join(lambda x: x != 2)
    assert sorted(memo) == [0, 1] and memo[0] != me and memo[1] == me


def _report(out: Path, workers_: str) -> object:
    """The migration report of tests/data/block_sums.cu made with `workers_` processes, its
    paths and timings left out."""
    # (every batch shared, the task's own runs started ahead of the verification, and its
    # other sets shared from the first)
    env = {**os.environ, "C2N_WORKERS": workers_, "C2N_FORK_AFTER": "0", "C2N_AHEAD_AFTER": "0",
           "C2N_SHARE_AFTER": "0"}  # fmt: skip
    src = Path(__file__).parent / "data" / "block_sums.cu"
    cmd = [sys.executable, "-m", "migrator.cli", str(src), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, env=env)

    def strip(v: object) -> object:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if not k.endswith("seconds")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v.replace(str(out), "OUT") if isinstance(v, str) else v

    return strip(json.loads((out / "block_sums_migration.json").read_text()))


def test_a_migration_on_two_processes_reports_what_it_reports_on_one(tmp_path: Path) -> None:
    """Inference (measurement runs), the lift's verification and the check each run their
    size sets on both cores: the report is the same as a one-process migration's."""
    one, two = _report(tmp_path / "a", "1"), _report(tmp_path / "b", "2")
    assert one == two
    assert "complete" in json.dumps(one)


def test_an_ahead_child_is_idle_once_every_item_is_done(two: None, tmp_path: Path) -> None:
    """`Ahead.idle`: false while the child still runs an item, true once it has finished them
    all (the lifter then joins it, and the fit may fork)."""
    import time

    memo: dict[int, int] = {}

    def job(x: int) -> None:
        if x == 1:
            (tmp_path / "1").touch()
            while not (tmp_path / "go").exists():
                time.sleep(0.01)
        memo[x] = x

    pending = workers.ahead(job, [0, 1], [memo])
    assert pending is not None
    _started(tmp_path / "1")
    assert not pending.idle()
    (tmp_path / "go").touch()
    deadline = time.monotonic() + 30
    while not pending.idle() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pending.idle()
    pending.join()
    assert memo == {0: 0, 1: 1}


def test_an_ahead_child_says_whether_it_runs_a_wanted_item(two: None, tmp_path: Path) -> None:
    """`Ahead.busy_with(wanted)`: true while the child runs an item `wanted` accepts (the
    verification then works on its own sets meanwhile), false for one it rejects (the join
    abandons that) and once the child is done."""
    import time

    memo: dict[int, int] = {}

    def job(x: int) -> None:
        (tmp_path / str(x)).touch()
        while not (tmp_path / f"go{x}").exists():
            time.sleep(0.01)
        memo[x] = x

    pending = workers.ahead(job, [0, 1], [memo])
    assert pending is not None
    _started(tmp_path / "0")
    assert pending.busy_with(lambda x: x == 0) and not pending.busy_with(lambda x: x == 1)
    (tmp_path / "go0").touch()
    _started(tmp_path / "1")
    deadline = time.monotonic() + 30
    while not pending.busy_with(lambda x: x == 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pending.busy_with(lambda x: x == 1) and not pending.busy_with(lambda x: x == 0)
    (tmp_path / "go1").touch()
    while not pending.idle() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pending.busy_with(lambda x: True)
    pending.join()
    assert memo == {0: 0, 1: 1}


def test_map_shared_forks_from_the_first_item(two: None) -> None:
    """`map_shared`: the child takes items from the start (two costly fits: `map_jobs` would
    run the first here and the second after it, alone)."""
    import time

    me = os.getpid()
    got = workers.map_shared(lambda x: (time.sleep(0.2), os.getpid())[1], [0, 1])
    assert me in got and any(p != me for p in got)
