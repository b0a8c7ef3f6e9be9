"""The diagnostics registry: unique permanent IDs, well-formed messages, usable rows."""

from __future__ import annotations

import re

import pytest

from migrator import diagnostics as diag


def test_ids_are_unique_well_formed_and_sorted() -> None:
    ids = list(diag.REGISTRY)
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"C2N\d{4}", i) for i in ids)
    assert ids == sorted(ids)
    names = [r.name for r in diag.REGISTRY.values()]
    assert len(names) == len(set(names))


def test_every_row_has_help_and_fields_render() -> None:
    for row in diag.REGISTRY.values():
        assert row.help.strip() and row.message.strip()
        assert row.severity in ("error", "warning", "note")
        d = (
            diag.make(row.id, **{f: f"<{f}>" for f in row.fields})
            if not {"byte"} & row.fields
            else diag.make(row.id, **{f: 1 for f in row.fields})
        )
        assert d.id == row.id and "{" not in d.message


def test_make_rejects_missing_or_extra_fields_and_unknown_ids() -> None:
    with pytest.raises(TypeError):
        diag.make("FILE_NOT_FOUND")
    with pytest.raises(TypeError):
        diag.make("FILE_NOT_FOUND", path="a", extra=1)
    with pytest.raises(KeyError):
        diag.make("C2N9999")


def test_render_includes_span() -> None:
    span = diag.Span(file="k.cu", line=3, col=5)
    d = diag.make("GOTO", span)
    assert d.render() == "k.cu:3:5: warning: C2N1008: goto in a kernel is not supported"
