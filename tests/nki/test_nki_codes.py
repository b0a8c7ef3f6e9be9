"""Every err_* code raised in migrator/nki is in the code table, once, with a unique id."""

import re
from pathlib import Path

import migrator.nki as mn
from migrator.nki.codes import BY_CODE, CODES


def test_every_raised_code_is_listed_and_ids_are_unique():
    package = Path(mn.__file__).parent
    used = set()
    for path in package.glob("*.py"):
        if path.name != "codes.py":
            used |= set(re.findall(r'"(err_[a-z0-9_]+)"', path.read_text()))
    assert used == set(BY_CODE), (used - set(BY_CODE), set(BY_CODE) - used)
    ids = [c.proposed_id for c in CODES]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"C2N3\d{3}", i) for i in ids)


def test_every_code_has_its_row_in_the_diagnostics_registry() -> None:
    from migrator.diagnostics import REGISTRY
    from migrator.nki.codes import CODES

    for c in CODES:
        row = REGISTRY[c.proposed_id]
        assert row.name == c.code.upper() and row.severity == "error"
