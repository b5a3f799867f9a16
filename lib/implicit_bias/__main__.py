"""Command line: `python -m implicit_bias {run,status,data,status-page,baselines}`."""

from __future__ import annotations

import argparse
import sys

from .chapter import PROFILES, chapters


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m implicit_bias",
                                     description="The implicit-bias-book runner.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute chapters with papermill into book/chapters/")
    run.add_argument("chapters", nargs="*", metavar="CHAPTER",
                     help=f"chapters to run (default: all): {', '.join(chapters())}")
    run.add_argument("--profile", default="smoke", help=f"one of: {', '.join(PROFILES)}")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    run.add_argument("--refresh", action="store_true", help="ignore cached results")
    run.add_argument("--log-output", action="store_true", help="stream cell output")
    status = sub.add_parser("status", help="print the claims dashboard")
    status.add_argument("--profile", choices=PROFILES, default=None)
    sub.add_parser("status-page", help="write book/status.md")
    base = sub.add_parser("baselines", help="rewrite tests/baselines from smoke figures")
    base.add_argument("chapters", nargs="*", metavar="CHAPTER")
    compare = sub.add_parser("compare", help="compare a run's figures and claims with a "
                             "reference results folder (GPU CI)")
    compare.add_argument("chapters", nargs="*", metavar="CHAPTER")
    compare.add_argument("--reference", default="results", help="reference results root")
    compare.add_argument("--candidate", required=True, help="regenerated results root")
    compare.add_argument("--profile", default="paper", choices=PROFILES)
    compare.add_argument("--tolerances", default=None, help="YAML: chapter -> figure -> tols")
    compare.add_argument("--summary", default=None, help="write the JSON summary here")
    data = sub.add_parser("data", help="fetch and verify the datasets")
    data.add_argument("datasets", nargs="*", default=None)
    args = parser.parse_args(argv)

    if args.command == "run":
        from .runner import run_chapter, validate

        try:
            selected = validate(args.chapters, args.profile, args.device)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        failed = []
        for chapter in selected:
            print(f"running {chapter} (profile {args.profile}, device {args.device}) ...",
                  flush=True)
            summary = run_chapter(chapter, args.profile, args.device, args.refresh,
                                  args.log_output)
            claims = summary["claims"] or {}
            print(f"  {chapter}: {'ok' if summary['ok'] else 'FAILED'} in "
                  f"{summary['seconds']:.0f} s; claims: "
                  + (", ".join(f"{n} {s}" for s, n in sorted(claims.items())) or "none"),
                  flush=True)
            if not summary["ok"]:
                print(f"  error: {summary['error']}\n  see book/chapters/{chapter}.ipynb",
                      file=sys.stderr)
                failed.append(chapter)
        return 1 if failed else 0
    if args.command == "status":
        from .runner import format_status

        print(format_status((args.profile,) if args.profile else PROFILES))
        return 0
    if args.command == "status-page":
        from .runner import write_status_page

        print(write_status_page())
        return 0
    if args.command == "baselines":
        from .chapter import check_chapter
        from .regression import write_baselines

        for chapter in args.chapters or chapters():
            check_chapter(chapter)
            print(f"{chapter}: {len(write_baselines(chapter))} baseline files written")
        return 0
    if args.command == "compare":
        from .runner import compare_with_reference

        return compare_with_reference(args.chapters or chapters(), args.reference,
                                      args.candidate, args.profile, args.tolerances,
                                      args.summary)
    if args.command == "data":
        from .data import DATASETS, DataError, fetch

        try:
            for name in args.datasets or DATASETS:
                fetch(name)
        except (DataError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
