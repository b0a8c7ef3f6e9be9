"""The library API: what the CLI and users call."""

from __future__ import annotations

from pathlib import Path

from migrator.cuda.frontend import analyze, analyze_file
from migrator.cuda.ir import TranslationUnit
from migrator.cuda.parse import parse_text


def inspect(
    source: str | Path,
    *,
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
    text: str | None = None,
) -> TranslationUnit:
    """Kernel IR for a CUDA file (or for `text`, reported under the name `source`).

    Raises `migrator.cuda.source.SourceError` (with diagnostics) for input that cannot be read,
    preprocessed or parsed.
    """
    if text is not None:
        return analyze(parse_text(text, str(source), include_dirs, defines))
    return analyze_file(source, include_dirs, defines)


def clear_caches() -> None:
    """Forget what this process remembers between calls: preprocessed and analysed files,
    parsed sources, recent runs of CUDA originals, lifted programs and drawn inputs. For timing a
    first migration (a fresh process is the same); results never depend on these caches."""
    from migrator import contract
    from migrator.cuda import frontend, parse, source
    from migrator.cuda.interp import spec_run
    from migrator.infer import measure
    from migrator.lift import lifter

    contract._INPUTS.clear()
    lifter._LIFTS.clear()
    lifter._NESTS.clear()
    lifter._LARGEST.clear()
    lifter._SPARED.clear()
    measure._PROBES.clear()
    measure._PROBE_VALUES.clear()
    measure._PROBE_COVER.clear()
    source._PREPROCESSED.clear()
    parse._TREES.clear()
    frontend._ANALYSED.clear()
    spec_run._PARSED.clear()
    spec_run._RUNS.clear()
