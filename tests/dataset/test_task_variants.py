"""Task variants (dtype, sizes) and tasks posed from the record alone (`write_files`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator import dataset
from migrator.contract import load_spec
from migrator.score import npy, score

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_bf16_variant_is_its_own_validated_task() -> None:
    base = dataset.build_task(CORPUS / "softmax_row.cu", check=False)
    v = dataset.build_task(CORPUS / "softmax_row.cu", dtype="bfloat16", validate=True)
    assert v.id != base.id and "dtype=bfloat16" in v.tags
    assert {t["dtype"] for t in v.spec["tensors"]} == {"bfloat16"}
    assert set(v.tolerances) == {"bfloat16"} and v.reference_check_ok
    assert v.expert_nki is None  # the expert kernel is written for float32
    assert v.validation is not None and v.validation.ok, v.validation
    assert v.validation.reference_verdict == "pass" and v.validation.killed == v.validation.mutants


def test_size_variant_posed_from_the_record_alone(tmp_path: Path) -> None:
    t = dataset.build_task(CORPUS / "vector_add.cu", sizes={"N": 3000})
    assert t.published_sizes == [{"N": 3000}] and "N=3000" in t.tags
    assert all(h["N"] % 32 for h in t.hidden_sizes)
    again = dataset.import_tasks(_roundtrip(t, tmp_path))[0]
    cu, spec = again.write_files(tmp_path / "posed")  # no corpus file is used from here on
    assert load_spec(spec).sizes == {"N": 3000} and (tmp_path / "posed" / "vector_add.py").is_file()
    cand = tmp_path / "posed" / "candidate.py"
    cand.write_text(again.reference_nki or "")
    r = score(cu, cand, spec=spec, seeds=1, nki_name="vector_add")
    assert r.verdict == "pass", r.summary


def _roundtrip(t: dataset.TaskRecord, tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    dataset.export_tasks([t], path)
    return path


def test_unknown_variant_size_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown sizes M"):
        dataset.build_task(CORPUS / "vector_add.cu", sizes={"M": 10}, check=False)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float16", "float32"])
def test_sandbox_npy_files_keep_ml_dtypes(tmp_path: Path, dtype: str) -> None:
    arr = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4).astype(npy.dtype_of(dtype))
    name = npy.save(tmp_path / "a.npy", arr)
    back = npy.load(tmp_path / "a.npy", name)
    assert back.dtype == arr.dtype and back.tobytes() == arr.tobytes()
