"""``python -m trglab <command>``: one entry point, one subcommand per module.

A subcommand is a module with two functions::

    add_arguments(parser)   # argparse options of the subcommand
    run(args) -> int        # do it; returns the exit status

and one line in ``COMMANDS`` below (name -> (module, help)). Modules are imported only
when their command runs. A ``ValueError`` whose class is named ``UsageError`` (or any
``trglab`` error listed in ``ONE_LINE_ERRORS``) raised by ``run`` is printed as one line
``trglab <command>: <message>`` on stderr with exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Add a command by adding a line here.
COMMANDS = {
    "trg": ("trglab.trg_cli", "ln Z/N, u (and c) of the 2D Ising model by TRG"),
    "check": ("trglab.check", "compare fresh figures with data/expected"),
    "build": ("trglab.build", "execute every page and build the site into _build/html"),
    "page": ("trglab.build_page", "re-run one page with other parameters into _build/runs/"),
}

ONE_LINE_ERRORS = ("UsageError", "ParameterError", "ExpectedError", "RecordError", "BuildError")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trglab", description="Executable lab notes on differentiable TRG.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        # options are added lazily in main() for the chosen command only
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"trglab: unknown command {argv[0]!r}; one of {', '.join(COMMANDS)}", file=sys.stderr)
            parser.print_usage(sys.stderr)
            return 2
        parser.print_help()
        return 0 if argv else 2
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    sub = argparse.ArgumentParser(prog=f"python -m trglab {name}", description=COMMANDS[name][1])
    module.add_arguments(sub)
    args = sub.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except ValueError as exc:
        if type(exc).__name__ in ONE_LINE_ERRORS:
            print(f"trglab {name}: {exc}", file=sys.stderr)
            return 2
        raise
