"""The `migrate` command line: argument parsing and exit codes only; work is in the library.

    migrate KERNEL.cu [options]          the main job (migration to NKI)
    migrate inspect KERNEL.cu [--json]   the kernel IR
    migrate diagnostics [--markdown]     every C2N diagnostic with its help line
    migrate run KERNEL.cu [--sizes N=..]  run a CUDA kernel on the CPU (the oracle)
    migrate profile KERNEL_nki.py ...    run an NKI kernel in the emulator, print its cost
    migrate score KERNEL.cu CANDIDATE.py  grade an NKI migration against its CUDA original
    migrate batch INPUT... --out R.jsonl  migrate many kernels, resumably
    migrate tasks INPUT... --out T.parquet  build migration task records (dataset builders)
    migrate mutants INPUT...             validate the scorer on wrong and correct migrations
    migrate corpus-check [DIR...]        validate every corpus entry, step by step

Exit codes: 0 success (migration complete), 1 migration partial (diagnostics remain),
2 bad input or usage, 3 migration failed, 70 internal error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from migrator.workers import Ahead

# (the pipeline is imported where a command needs it: `migrate KERNEL.cu` preprocesses its
# file in a child while this process imports, `_preprocess_ahead`)

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_FAILED, EXIT_INTERNAL = 0, 1, 2, 3, 70


class UsageError(Exception):
    """Bad arguments: printed as `migrate: error: ...`, exit code 2."""


def _add_frontend_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-I",
        dest="include_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="add a directory to the #include search path",
    )
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="define a preprocessor macro",
    )


def _defines(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name.isidentifier():
            raise UsageError(f"-D {item}: {name!r} is not a macro name")
        out[name] = value or "1"
    return out


def _sizes(text: str | None) -> dict[str, int] | None:
    if not text:
        return None
    out: dict[str, int] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if not name.strip() or not value.strip().isdigit():
            raise UsageError(f"--sizes {text}: expected NAME=INT[,NAME=INT...]")
        out[name.strip()] = int(value)
    return out


def _cmd_inspect(args: argparse.Namespace) -> int:
    from migrator.api import inspect
    from migrator.cuda.summary import render

    tu = inspect(args.file, include_dirs=args.include_dirs, defines=_defines(args.defines))
    if args.kernel:
        try:
            kernels = [tu.kernel(args.kernel)]
        except KeyError as e:
            raise UsageError(str(e.args[0])) from e
        sites = [s for s in tu.launch_sites if s.kernel == args.kernel]
        tu = tu.model_copy(update={"kernels": kernels, "launch_sites": sites})
    if args.json:
        sys.stdout.write(tu.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(render(tu))
    return EXIT_OK


def _register_inspect(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "inspect",
        help="print the kernel IR of a CUDA file",
        description="Parse a CUDA file and print its kernel IR.",
    )
    p.add_argument("file", help="CUDA source (.cu/.cuh)")
    p.add_argument("--kernel", help="only this kernel")
    p.add_argument("--json", action="store_true", help="machine-readable IR (JSON)")
    _add_frontend_options(p)
    p.set_defaults(func=_cmd_inspect)


def _cmd_diagnostics(args: argparse.Namespace) -> int:
    from migrator import diagnostics as diag

    if args.markdown:
        sys.stdout.write(diag.markdown_table())
    else:
        for row in diag.REGISTRY.values():
            state = " (retired)" if row.retired else ""
            sys.stdout.write(
                f"{row.id} {row.name}{state} [{row.severity}, effort {row.effort}]\n"
                f"    {row.message}\n    help: {row.help}\n"
            )
    return EXIT_OK


def _register_diagnostics(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diagnostics", help="list every C2N diagnostic ID")
    p.add_argument("--markdown", action="store_true", help="as the docs/diagnostics.md table")
    p.set_defaults(func=_cmd_diagnostics)


def _launch(grid: str | None, block: str | None) -> tuple[str, str] | None:
    if grid is None and block is None:
        return None
    if grid is None or block is None:
        raise UsageError("--grid and --block go together (the launch the spec is inferred for)")
    return grid, block


def _preprocess_ahead(args: argparse.Namespace) -> Ahead | None:
    """The input file preprocessed (pcpp, a tenth of a second or more) in a forked child
    while this process imports the pipeline; `_cmd_migrate` joins it, and the front end finds
    the file in the preprocessor's memo. None where nothing is started (no fork, a file
    already preprocessed in this process, bad -D): the front end then preprocesses it."""
    from migrator.cuda import source
    from migrator.workers import ahead

    try:
        defines = _defines(args.defines)
    except UsageError:
        return None
    if source.preprocessed_before() or not Path(args.file).is_file():
        return None

    def run(path: str) -> None:
        source.preprocess(source.read_source(path), args.include_dirs, defines)

    return ahead(run, [args.file], [source.PREPROCESSED])


def _cmd_migrate(args: argparse.Namespace) -> int:
    from migrator.migration import migrate
    from migrator.report import markdown, summary

    pending = getattr(args, "preprocessing", None)
    if pending is not None:
        pending.join()
    if Path(args.file).is_dir():
        raise UsageError(
            f"{args.file} is a directory: migrate one file (migrate {Path(args.file) / 'k.cu'}),"
            f" or every .cu in it with `migrate batch {args.file} --out results.jsonl`"
        )

    m = migrate(
        args.file, kernel=args.kernel, spec=args.spec, out_dir=args.out, target=args.target,
        check=args.check, dtype=args.dtype, sizes=_sizes(args.sizes), nki_api=args.nki_api,
        include_dirs=args.include_dirs, defines=_defines(args.defines),
        launch=_launch(args.grid, args.block),
    )  # fmt: skip
    out_dir = Path(args.out) if args.out else Path(args.file).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(args.file).stem
    (out_dir / f"{stem}_migration.md").write_text(markdown(m), encoding="utf-8")
    (out_dir / f"{stem}_migration.json").write_text(m.model_dump_json(indent=2), encoding="utf-8")
    if args.json:
        sys.stdout.write(m.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(summary(m))
        sys.stdout.write(f"report: {out_dir / (stem + '_migration.md')}\n")
    return {"complete": EXIT_OK, "partial": EXIT_PARTIAL, "failed": EXIT_FAILED}[m.status]


# Subcommands: name -> registration function. Later stages add theirs here.
COMMANDS: dict[str, Callable[[argparse._SubParsersAction], object]] = {  # type: ignore[type-arg]
    "inspect": _register_inspect,
    "diagnostics": _register_diagnostics,
    "run": lambda sub: _register_run(sub),
    "profile": lambda sub: _register_from("migrator.score.profile_cli", sub),
    "batch": lambda sub: _register_from("migrator.dataset.cli", sub),
    "score": lambda sub: _register_from("migrator.score.cli", sub),
    "mutants": lambda sub: _register_from("migrator.score.mutate", sub),
    "tasks": lambda sub: _register_from("migrator.dataset.tasks_cli", sub),
    "corpus-check": lambda sub: _register_from("migrator.dataset.corpus_check", sub),
}


def _register_run(sub: argparse._SubParsersAction) -> object:  # type: ignore[type-arg]
    """`migrate run`, with spec inference handed in (the interpreter is an earlier stage)."""
    from migrator.cuda.interp import run_cli

    def infer(source: Path, kernel: str | None) -> object:
        from migrator.infer import infer_for_file

        return infer_for_file(source, kernel)

    return run_cli.register(sub, infer=infer)


def _register_from(module: str, sub: argparse._SubParsersAction) -> object:  # type: ignore[type-arg]
    """Import a stage's CLI module only when its command is built (keeps `migrate` fast)."""
    import importlib

    return importlib.import_module(module).register(sub)


class _Version(argparse.Action):
    """`--version`, with the version read only when asked (see `migrator._version`)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import migrator

        print(f"cuda2nki {migrator.__version__}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    main_job = build_migrate_parser().format_help().replace("usage: migrate", "  migrate", 1)
    parser = argparse.ArgumentParser(
        prog="migrate",
        description="cuda2nki: migrate CUDA kernels to NKI (AWS Trainium/Inferentia) and score "
        "NKI migrations.\n\nThe main job is `migrate KERNEL.cu`; other commands below.",
        epilog="the main job, `migrate KERNEL.cu [options]`:\n" + main_job,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, register in COMMANDS.items():
        if only is None or name == only:
            register(sub)
    return parser


def build_migrate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="migrate", description="Migrate a CUDA kernel to NKI.")
    p.add_argument("file", help="CUDA source (.cu/.cuh)")
    p.add_argument("--kernel", help="kernel to migrate (default: every __global__ kernel)")
    p.add_argument("--spec", help="task spec sidecar (default: the .toml next to the .cu)")
    p.add_argument("-o", "--out", help="output directory (default: next to the input)")
    p.add_argument("--target", choices=["trn1", "trn2"], default="trn2", help="Trainium generation")
    p.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the generated kernel against the CUDA interpreter (default: on)",
    )
    p.add_argument("--sizes", help="an extra size set for the check, e.g. M=1000,N=333")
    p.add_argument(
        "--grid",
        help="without a spec or a launch site: grid size(s) in the kernel's integer parameters,"
        " e.g. '(n + 255) / 256' or 'cols / 32, rows / 8'",
    )
    p.add_argument("--block", help="with --grid: block size(s), e.g. 256 or '32, 8'")
    p.add_argument(
        "--dtype",
        choices=["bfloat16", "float16"],
        help="tensors in this dtype (fp32 accumulation); default: the spec's",
    )
    p.add_argument(
        "--nki-api",
        choices=["legacy", "new"],
        default="legacy",
        help="legacy: neuronxcc.nki (masks, nl.arange); new: the standalone nki "
        "package (NKI 0.3+, trace-time slices)",
    )
    p.add_argument("--json", action="store_true", help="print the migration as JSON")
    p.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    _add_frontend_options(p)
    p.set_defaults(func=_cmd_migrate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    is_file = first is not None and first not in COMMANDS
    parser = build_migrate_parser() if is_file else build_parser(first)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed usage or help
        return int(e.code or 0) and EXIT_USAGE
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_USAGE if argv else EXIT_OK
    if args.func is _cmd_migrate:
        args.preprocessing = _preprocess_ahead(args)
    from migrator.contract import SpecError
    from migrator.cuda.parse import render_with_caret
    from migrator.cuda.source import SourceError

    try:
        return int(args.func(args))
    except SourceError as e:
        for d in e.diagnostics:
            sys.stderr.write(render_with_caret(d) + "\n")
        n = sum(d.severity == "error" for d in e.diagnostics)
        sys.stderr.write(f"{n} error(s); nothing was written.\n")
        return EXIT_USAGE
    except (UsageError, SpecError) as e:  # a spec sidecar is the user's input too
        sys.stderr.write(f"migrate: error: {e}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("migrate: interrupted\n")
        return 130
    except BrokenPipeError:  # `migrate diagnostics | head`: the reader has what it wanted
        _quiet_stdout()
        return 128 + 13  # as a Unix tool ended by SIGPIPE
    except Exception as e:  # a bug in cuda2nki, not in the user's input
        if getattr(args, "debug", False):
            traceback.print_exc()
        else:
            where = Path(str(getattr(args, "file", ""))).name
            sys.stderr.write(
                f"migrate: internal error while processing {where or 'the request'}: "
                f"{type(e).__name__}: {e}\n(run again with --debug for the traceback, and "
                "please report it with the input file)\n"
            )
        return EXIT_INTERNAL


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush to a closed pipe is silent."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run() -> NoReturn:
    """The `migrate` command: `main`, then the process ends without tearing the interpreter
    down. A lift leaves millions of traced values and memoised runs that CPython would free one
    by one at exit (about a tenth of a second, after the output is written), so, as mypy does,
    the output is flushed, the exit handlers run, and the process ends there."""
    import atexit
    import os

    from migrator import teardown

    teardown.skip_teardown()  # (what it is done with may be left to the process's end)
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # (the reader left: as `main` answers it)
        _quiet_stdout()
        code = code or 128 + 13
    except (OSError, ValueError):
        pass
    atexit._run_exitfuncs()  # (temporary folders' finalizers, logging's flush)
    os._exit(code)


if __name__ == "__main__":
    run()
