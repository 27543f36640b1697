"""Offline evaluation sets built from Debian documentation packages: sections are documents, and the queries are
either the headings or questions written by hand.

`ragtune doc-sets list` prints the sets of specs.yaml; `ragtune doc-sets build NAME...` builds them (the package's
docstring says what a build writes). Every set's output folder is checked before the first download, so a bad
`--out` costs one line, not a download.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from experiments.datasets.doc_sets.builder import MARKER, build, default_root
from experiments.datasets.doc_sets.packages import default_deb_dir
from experiments.datasets.doc_sets.specs import SPECS
from experiments.runs.output_dir import check_output_folder


def _deb_file(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a file (a .deb package)")
    return path


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragtune doc-sets", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the sets this module can build")
    build_cmd = commands.add_parser("build", help="download a package and build one set")
    build_cmd.add_argument("name", nargs="+", choices=sorted(SPECS), help="set name(s)")
    build_cmd.add_argument(
        "--out", type=Path, help=f"output folder (one set only; default {default_root()}/NAME)"
    )
    build_cmd.add_argument(
        "--deb", type=_deb_file, help="use this .deb instead of apt-get download (one set only)"
    )
    build_cmd.add_argument(
        "--deb-dir", type=Path, default=default_deb_dir(), help="where downloaded .debs are kept"
    )
    build_cmd.add_argument("--max-queries", type=_positive, help="cap on queries (default: the set's own)")
    build_cmd.add_argument(
        "--force", action="store_true", help="replace an output folder that is not a set ragtune wrote"
    )
    build_cmd.add_argument("--min-heading-words", type=int, default=3)
    build_cmd.add_argument("--min-body-words", type=int, default=30)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        for spec in SPECS.values():
            print(f"{spec.name:22} {spec.package:24} {spec.language}  {spec.description}")
        return 0
    if len(args.name) > 1 and (args.out or args.deb):
        parser.error("--out and --deb take one set name")
    out_dirs = {name: args.out or default_root() / name for name in args.name}
    for out_dir in out_dirs.values():  # every set's folder before the first download
        check_output_folder(out_dir, args.force, MARKER)
    for name, out_dir in out_dirs.items():
        source = build(
            SPECS[name],
            out_dir,
            deb=args.deb,
            deb_dir=args.deb_dir,
            max_queries=args.max_queries,
            min_heading_words=args.min_heading_words,
            min_body_words=args.min_body_words,
            force=args.force,
        )
        queries = (f"{source['answerable']} answerable and {source['unanswerable']} unanswerable questions written "
                   "by hand" if "how_written" in source else f"{source['queries']} queries ({source['query_sampling']})")
        print(f"{name}: {source['package']} {source['version']}: {source['documents']} documents, {queries} -> {out_dir}")
        print(f"  dropped {source['dropped']}; without query {source['documents_without_query']}")
        print(f"  {source['load']}")
    return 0
