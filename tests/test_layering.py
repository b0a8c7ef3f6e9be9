"""The import graph follows the pipeline: a stage imports only earlier stages (style rule 1)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "migrator"

# stage -> migrator subpackages/modules it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "diagnostics": set(),
    "contract": set(),
    "cuda": {"diagnostics", "contract"},
    "nki": {"diagnostics", "contract"},  # the emulator is independent of the CUDA side
    # planning: IR + contract -> plan; emission renders it; neither runs anything
    "nkiexpr": {"cuda"},
    "plan": {"diagnostics", "contract", "cuda"},
    # lowering rules read lifted tensor programs (the `lifted` rules)
    "patterns": {"diagnostics", "contract", "cuda", "patterns", "plan", "nkiexpr", "lift"},
    "emit": {"plan"},
    # lifting traces the CUDA interpreter and fits a tensor program; it plans nothing
    "lift": {"diagnostics", "contract", "cuda", "workers"},
    # grading runs both executors and the migrator's reference, on the spec `migrate` would
    # infer where there is no sidecar; nothing imports the scorer
    "score": {"diagnostics", "contract", "cuda", "nki", "check", "migration", "infer", "score"},
}
PATTERNS = PKG.parent / "patterns"  # shipped as migrator.patterns


def _stage(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("migrator."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("migrator."):
                    out.add(alias.name.split(".")[1])
    return out


def test_stages_import_only_earlier_stages() -> None:
    problems = []
    files = [(p, _stage(p)) for p in sorted(PKG.rglob("*.py"))]
    files += [(p, "patterns") for p in sorted(PATTERNS.glob("*.py"))]
    for path, stage in files:
        if stage not in ALLOWED:
            continue
        for dep in _imports(path) - {stage}:
            if dep not in ALLOWED[stage]:
                problems.append(f"{path.relative_to(PKG.parent)} ({stage}) imports migrator.{dep}")
    assert not problems, "\n".join(problems)


def test_every_package_ships_in_the_wheel() -> None:
    """pyproject lists packages explicitly; a new subpackage must be added there too."""
    import tomllib

    root = PKG.parent
    listed = set(
        tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {"migrator." + ".".join(p.parent.relative_to(PKG).parts) if p.parent != PKG
             else "migrator" for p in PKG.rglob("__init__.py")}  # fmt: skip
    found |= {"migrator.patterns", "migrator.templates"}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
