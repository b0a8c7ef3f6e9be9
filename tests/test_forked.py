"""`map_split`: the later items on a forked child, the same results as one process."""

from __future__ import annotations

import os

import pytest

from migrator import forked


def _square_with_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_results_in_order_and_the_later_items_computed_by_a_child() -> None:
    got = forked.map_split(_square_with_pid, range(6), here=2)
    assert [v for v, _ in got] == [x * x for x in range(6)]
    pids = [p for _, p in got]
    assert pids[:2] == [os.getpid()] * 2
    if forked.can_fork():
        assert len(set(pids[2:])) == 1 and pids[2] != os.getpid()
    else:
        assert set(pids) == {os.getpid()}


def test_a_failing_child_has_its_share_redone_here() -> None:
    parent = os.getpid()

    def only_here(x: int) -> int:
        if os.getpid() != parent:
            raise RuntimeError("the child cannot")
        return x + 1

    assert forked.map_split(only_here, [1, 2, 3], here=1) == [2, 3, 4]


def test_an_error_of_an_item_is_raised_as_without_a_fork() -> None:
    def fails_on_two(x: int) -> int:
        if x == 2:
            raise ValueError("two")
        return x

    with pytest.raises(ValueError, match="two"):
        forked.map_split(fails_on_two, [0, 1, 2], here=1)  # (the child's item)
    with pytest.raises(ValueError, match="two"):
        forked.map_split(fails_on_two, [2, 1, 0], here=1)  # (this process's item)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left behind


def test_switched_off_one_process_does_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("C2N_JOBS", "1")
    assert not forked.can_fork()
    got = forked.map_split(_square_with_pid, [3, 4], here=1)
    assert got == [(9, os.getpid()), (16, os.getpid())]
    assert forked.map_split(_square_with_pid, [], here=1) == []
