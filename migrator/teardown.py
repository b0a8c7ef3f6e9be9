"""Whether this process ends without tearing the interpreter down (`cli.run`: `os._exit` once
the output is flushed). Such a process may keep large structures it is done with alive to the
end rather than free them object by object (a traced run: millions of values), since the
operating system takes its memory back whole; a library's caller never does."""

from __future__ import annotations

_SKIPPED = [False]


def skip_teardown() -> None:
    """Say that this process ends with `os._exit` (the `migrate` command's entry point)."""
    _SKIPPED[0] = True


def skipped() -> bool:
    return _SKIPPED[0]
