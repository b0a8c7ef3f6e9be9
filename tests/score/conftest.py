"""Shared fixtures for the scorer tests: generated reference kernels (migrate, no check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.contract import load_spec
from migrator.migration import migrate

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "corpus"
ADVERSARIAL = Path(__file__).resolve().parent / "adversarial"


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory):
    """stem -> (generated NKI file, kernel name in it), migrated once per session."""
    out = tmp_path_factory.mktemp("generated")
    cache: dict[str, tuple[Path, str]] = {}

    def get(stem: str) -> tuple[Path, str]:
        if stem not in cache:
            spec = load_spec(CORPUS / f"{stem}.toml")
            m = migrate(CORPUS / f"{stem}.cu", kernel=spec.kernel.name, out_dir=out, check=False)
            km = m.kernels[0]
            assert km.status == "complete" and km.nki_file, km.reasons
            cache[stem] = (Path(km.nki_file), spec.kernel.name.removesuffix("_kernel"))
        return cache[stem]

    return get
