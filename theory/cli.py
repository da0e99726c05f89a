"""The ``attnbounds`` command: a thin layer over public functions.

Subcommands: ``list``, ``verify``, ``search``, ``cite``, ``prove``, ``empirical``.
Exit codes: 0 when the run completed (whatever the verdicts), 2 on bad input, 1 on internal error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from theory.errors import AttnBoundsError


def cmd_list(args: argparse.Namespace) -> int:
    from theory import registry

    statements = registry.all_statements()
    if args.ids:
        statements = [registry.get(i) for i in args.ids]
    for s in statements:
        if args.short:
            print(f"{s.id:48s} {s.formula}")
        else:
            print(s.describe())
            print()
    return 0


def _delegate(module: str, func: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return importlib.import_module(module).__getattribute__(func)(args.rest)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnbounds", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="print every statement reading with formula and hypotheses")
    p.add_argument("ids", nargs="*", help="only these ids")
    p.add_argument("--short", action="store_true", help="one line per reading")
    p.set_defaults(func=cmd_list)
    for name, module, func, help_ in (
        ("prove", "proofs.cli", "main", "replay the machine-checked derivations"),
        ("empirical", "empirical.cli", "main", "run the paper's experiments on a GPT-2-family model"),
    ):
        p = sub.add_parser(name, help=help_, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=_delegate(module, func))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AttnBoundsError as exc:
        print(f"attnbounds: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
