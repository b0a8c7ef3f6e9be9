"""A fused classifier (softmax, the loss at each row's label, and the gradient: probabilities
minus the one-hot label, times the row's upstream gradient) lifts to a row program whose
gradient selects by `j == targets[i]`, and migrates as one row kernel in both dialects; without
a spec, the labels are inferred to lie within a row."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.views import view_candidates
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "fused_ce.cu"
SPEC = """
    [kernel]
    name = "fused_ce"
    [sizes]
    N = 40
    V = 50
    [[size_sets]]
    N = 7
    V = 300
    [[tensors]]
    name = "logits"
    role = "in"
    shape = ["N", "V"]
    [[tensors]]
    name = "dlosses"
    role = "in"
    shape = ["N"]
    [[tensors]]
    name = "targets"
    role = "in"
    dtype = "int32"
    shape = ["N"]
    [[tensors]]
    name = "dlogits"
    role = "out"
    shape = ["N", "V"]
    [[tensors]]
    name = "losses"
    role = "out"
    shape = ["N"]
    [inputs.targets]
    dist = "int"
    high = "V"
    [[scalars]]
    name = "N"
    size = "N"
    [[scalars]]
    name = "V"
    size = "V"
    [launch]
    grid = ["N"]
    block = [128]
"""


def _task(tmp_path: Path) -> Path:
    (tmp_path / "fused_ce.cu").write_text(KERNEL.read_text())
    (tmp_path / "fused_ce.toml").write_text(textwrap.dedent(SPEC))
    return tmp_path / "fused_ce.cu"


def test_the_gradient_lifts_to_a_select_by_the_label(tmp_path: Path) -> None:
    _task(tmp_path)
    result = lift_task(load_spec(tmp_path / "fused_ce.toml"))
    assert result.ok, result.render()
    assert result.program is not None
    text = result.program.render()
    assert "dlogits[i, j] = (j == targets[i] ? " in text
    assert "logits[i, targets[i]]" in text  # the loss picks the label's logit


@pytest.mark.parametrize("api", ["legacy", "new"])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_fused_classifier_migrates_as_one_row_kernel(
    tmp_path: Path, api: str, target: str
) -> None:
    (k,) = migrate(_task(tmp_path), out_dir=tmp_path / api, nki_api=api, target=target).kernels
    assert (k.family, k.status) == ("rows", "complete"), k.diagnostics
    assert k.check is not None and k.check.ok
    src = k.nki_source or ""
    assert "nl.equal(col_ids, targets_col)" in src  # the gradient's one-hot row
    # the loss's pick: one range select on trn2 (a VectorE pass, no -inf * 0), which trn1 lacks
    assert ("nisa.range_select(" in src) == (target == "trn2")
    assert ("data=nl.where(logits_at_targets_hot" in src) == (target == "trn1")
    # one exp-sum per row, not one per spelling of its variables
    assert src.count("op=nl.exp") == 1


def test_labels_are_inferred_to_lie_within_a_row(tmp_path: Path) -> None:
    (tmp_path / "fused_ce.cu").write_text(KERNEL.read_text())
    (k,) = migrate(tmp_path / "fused_ce.cu", out_dir=tmp_path / "out").kernels
    assert k.status == "complete", k.diagnostics
    spec = load_spec(next((tmp_path / "out").glob("*.inferred.toml")))
    dist = spec.inputs["targets"]
    assert (dist.dist, dist.high) == ("int", "V")


def test_flat_tensors_lift_to_the_label_select_and_view_as_rows(tmp_path: Path) -> None:
    """Logits and gradients as flat [N * V] tensors (as llm.c declares them): the label test
    is `i % V == targets[i // V]`, and the rows view keeps the per-row tensors as they are."""
    flat = textwrap.dedent(SPEC).replace('shape = ["N", "V"]', 'shape = ["N * V"]')
    (tmp_path / "fused_ce.cu").write_text(KERNEL.read_text())
    (tmp_path / "fused_ce.toml").write_text(flat)
    result = lift_task(load_spec(tmp_path / "fused_ce.toml"))
    assert result.ok and result.program is not None, result.render()
    assert "(i % V) == targets[(i // V)] ?" in result.program.render()
    # (a user's flat contract is kept; an inferred one is read through the views)
    program, vspec = view_candidates(result.program, load_spec(tmp_path / "fused_ce.toml"))[0]
    shapes = {t.name: [str(d) for d in t.shape] for t in vspec.tensors}
    assert shapes["logits"] == ["N", "V"] and shapes["dlosses"] == ["N"]
    assert "dlogits[i, j] = (j == targets[i] ?" in program.render()


def test_the_canonical_form_budget_is_per_form_fitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gradient's rows are fitted once, then (the label's elements computed differently)
    its picked and other elements apart: each fit gets the whole budget. Shared across them,
    llm.c's fused_classifier_kernel4 (a running max and sum per thread) ran out at the third."""
    import migrator.lift.fit as fit
    import migrator.lift.lifter as lifter

    spent: list[int] = []
    one_form = fit._one_form

    def counted(c, *args, **kwargs):  # type: ignore[no-untyped-def]
        c.work = 0  # what each fit needs on its own
        try:
            return one_form(c, *args, **kwargs)
        finally:
            spent.append(c.work)

    monkeypatch.setattr(fit, "_one_form", counted)
    assert lift_task(load_spec(_task(tmp_path).with_suffix(".toml"))).ok
    limit = max(spent) + 1
    assert sum(spent) > limit  # (one budget for all the fits would not do)
    monkeypatch.setattr(fit, "_one_form", one_form)
    monkeypatch.setattr(fit, "MAX_CANON_WORK", limit)
    monkeypatch.setattr(lifter, "_LIFTS", {})  # (lifted again, not from the memo)
    result = lift_task(load_spec(tmp_path / "fused_ce.toml"))
    assert result.ok, result.error
