"""Rendering a `Plan` with the family's jinja2 template (StrictUndefined: no silent gaps)."""

from __future__ import annotations

import ast
import keyword
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import jinja2

from migrator.plan import Plan


class EmitError(RuntimeError):
    """A template produced invalid Python: a bug in a template, never in the user's input."""


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs in jinja2's per-user temporary directory (keyed
    by each template's source, so an edited template is compiled again): compiling them was a
    tenth of a second of every migration. None where no safe directory can be had."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(files("migrator.templates"))),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Python source, not HTML
    )
    env.filters["basename"] = lambda p: Path(str(p)).name
    env.filters["add_suffix"] = lambda s, suffix: f"{s}{suffix}"
    env.filters["pyname"] = lambda s: f"{s}_" if keyword.iskeyword(str(s)) else str(s)
    return env


NKI_APIS = ("legacy", "new")


# (family, variant) pairs the new dialect cannot express yet
# (elements picked by index from a 2-D table: the new dialect's vector offset steps whole rows)
UNSUPPORTED_NEW: set[tuple[str, str]] = {("elementwise", "lifted-pick-2d")}


def has_template(family: str, api: str = "legacy", variant: str | None = None) -> bool:
    if api == "new" and (family, variant) in UNSUPPORTED_NEW:
        return False
    prefix = "new/" if api == "new" else ""
    return (Path(str(files("migrator.templates"))) / f"{prefix}{family}.py.j2").is_file()


def render(plan: Plan, template: str | None = None, api: str = "legacy") -> str:
    """NKI source for a plan; checked to be valid Python before it is returned.

    `api` picks the dialect: "legacy" (`neuronxcc.nki`, masks and `nl.arange` indices) or "new"
    (the standalone `nki` package, NKI 0.3+: slices sized at trace time)."""
    name = template or f"{'new/' if api == 'new' else ''}{plan.family}.py.j2"
    text = environment().get_template(name).render(plan=plan)
    text = tidy(text)
    try:
        ast.parse(text)
    except SyntaxError as e:
        raise EmitError(
            f"template {name} produced invalid Python at line {e.lineno}: {e.msg}\n"
            + "\n".join(text.splitlines()[max(0, (e.lineno or 1) - 3) : (e.lineno or 1) + 2])
        ) from e
    return text


def tidy(text: str) -> str:
    """At most two blank lines in a row, none opening a block or at the end."""
    out: list[str] = []
    blank = 0
    for line in text.splitlines():
        if not line.strip():
            blank += 1
            if blank > 2 or (out and out[-1].rstrip().endswith(":")):
                continue  # no blank line opening a block
            out.append("")
        else:
            blank = 0
            out.append(line.rstrip())
    return "\n".join(out).strip("\n") + "\n"
