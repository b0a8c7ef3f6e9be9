"""Report schema and renderings, the static scan, and the `score` subcommand's exit codes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from migrator.contract import load_spec
from migrator.score import SCHEMA_VERSION, FidelityReport, score
from migrator.score.cli import main, register
from migrator.score.defences import scan_source
from migrator.score.report import render_html, render_json, render_markdown, render_text
from migrator.score.rules import RULES

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
ADVERSARIAL = Path(__file__).resolve().parent / "adversarial"


def test_schema_is_published_and_versioned() -> None:
    schema = FidelityReport.model_json_schema()
    assert "schema_version" in schema["properties"] and SCHEMA_VERSION == "1.0"
    assert {"verdict", "score", "findings", "trials", "numerics"} <= set(schema["properties"])


def test_rule_table_is_consistent() -> None:
    assert all(k.startswith("C2N4") and len(k) == 7 for k in RULES)
    assert len({r.name for r in RULES.values()}) == len(RULES)


def test_renderings_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["score", str(CORPUS / "vector_add.cu"), str(ADVERSARIAL / "returns_input.py"),
                 "--format", "json", "-o", str(out), "--seeds", "1", "--no-reference"])  # fmt: skip
    assert code == 1
    r = FidelityReport.model_validate(json.loads(out.read_text()))
    assert r.verdict == "fail" and "C2N4022" in r.rule_ids()
    text, md = render_text(r), render_markdown(r)
    assert "C2N4022" in text and "fix:" in text
    assert md.startswith("# Fidelity report") and "| C2N4022 RETURNS_INPUT |" in md
    assert json.loads(render_json(r, timing=False)).get("timing") is None
    page = render_html(r)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<script" not in page
    assert "C2N4022 RETURNS_INPUT" in page
    assert main(["score", str(CORPUS / "vector_add.cu"), str(tmp_path / "missing.py")]) == 2
    capsys.readouterr()


def test_cli_pass_exit_code(generated, capsys: pytest.CaptureFixture[str]) -> None:
    path, name = generated("vector_add")
    code = main(["score", str(CORPUS / "vector_add.cu"), str(path), "--nki-name", name,
                 "--seeds", "1", "--format", "md"])  # fmt: skip
    assert code == 0 and "**PASS**" in capsys.readouterr().out


def test_register_adds_the_subcommand() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["score", "a.cu", "b.py", "--format", "md"])
    assert args.handler is not None and args.format == "md"


def test_static_scan_ignores_main_block_and_constant_tables(tmp_path: Path) -> None:
    spec = load_spec(CORPUS / "vector_add.toml")
    f = tmp_path / "k.py"
    f.write_text(
        'if __name__ == "__main__":\n    import sys\n'
        "import neuronxcc.nki as nki\nWEIGHTS = [0.25, 0.5]\n_CACHE = {}\n"
        "@nki.jit\ndef vector_add(a, b):\n    # comment\n    return a\n"
    )
    rules = [x.rule for x in scan_source(f, spec, "vector_add")]
    assert rules.count("C2N4024") == 1  # the empty cache, not the constant table
    assert "C2N4028" not in rules and "C2N4041" in rules  # b unused


def test_bad_spec_is_a_bad_input() -> None:
    with pytest.raises(ValueError, match="describes"):
        score(CORPUS / "vector_add.cu", ADVERSARIAL / "returns_input.py", kernel="other")
