"""Command line: `python -m implicit_bias {run,status,stale,recompute,data,status-page,
baselines,compare}`."""

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
    base = sub.add_parser("baselines", help="report what would change in tests/baselines, "
                          "then rewrite the figures named (or all, with --all)")
    base.add_argument("chapters", nargs="*", metavar="CHAPTER")
    base.add_argument("--figures", nargs="+", default=None, metavar="FIGURE",
                      help="rewrite only these figures (of a single chapter)")
    base.add_argument("--all", action="store_true", help="rewrite every figure of the "
                      "chapters")
    compare = sub.add_parser("compare", help="compare a run's figures and claims with a "
                             "reference results folder (GPU CI)")
    compare.add_argument("chapters", nargs="*", metavar="CHAPTER")
    compare.add_argument("--reference", default="results", help="reference results root")
    compare.add_argument("--candidate", required=True, help="regenerated results root")
    compare.add_argument("--profile", default="paper", choices=PROFILES)
    compare.add_argument("--tolerances", default=None, help="YAML: chapter -> figure -> tols")
    compare.add_argument("--summary", default=None, help="write the JSON summary here")
    compare.add_argument("--report", default=None, help="folder of the figure report "
                         "(default: CANDIDATE/reports/figures-PROFILE)")
    stale = sub.add_parser("stale", help="list committed results that the current code would "
                           "not produce, with the command that recomputes them")
    stale.add_argument("chapters", nargs="*", metavar="CHAPTER")
    stale.add_argument("--profile", default="paper", choices=PROFILES)
    recompute = sub.add_parser("recompute", help="recompute the cheapest committed task of "
                               "every task function and compare within the measured "
                               "tolerances (data/tolerances/recompute.yaml)")
    recompute.add_argument("chapters", nargs="*", metavar="CHAPTER")
    recompute.add_argument("--profile", default="paper", choices=PROFILES)
    recompute.add_argument("--json", default=None, help="write the report (with the "
                           "deviations of every output) here")
    recompute.add_argument("--tolerances", default=None, help="tolerances file (default: "
                           "data/tolerances/recompute.yaml)")
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
        failed, bad_claims = [], []
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
            tasks = summary["tasks"]
            print(f"  tasks: {tasks['computed']} computed, {tasks['cached']} from the cache, "
                  f"{tasks['failed']} failed", flush=True)
            for error in tasks["errors"][:5]:
                params = {k: v for k, v in error["task"].items() if k != "device"}
                print(f"  failed task ({error['sweep']}) {params}: "
                      f"{error['error'].strip().splitlines()[-1]}", file=sys.stderr)
            if not summary["ok"]:
                print(f"  error: {summary['error']}\n  the failed execution is kept at "
                      f"results/{args.profile}/{chapter}/.run/failed.ipynb", file=sys.stderr)
                failed.append(chapter)
            elif not summary["claims_ok"]:
                bad = summary["bad_claims"] or ["no claims report written"]
                print(f"  claims not as expected in {chapter}: " + "; ".join(bad),
                      file=sys.stderr)
                bad_claims.append(chapter)
        if failed or bad_claims:
            print(f"error: {len(failed)} chapter(s) failed to execute {failed}, "
                  f"{len(bad_claims)} with claims not as expected {bad_claims}",
                  file=sys.stderr)
            return 1
        return 0
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
        from .regression import baseline_changes, report_folder, write_baselines, write_report

        selected = args.chapters or chapters()
        if args.figures and len(selected) != 1:
            print("error: --figures needs exactly one chapter", file=sys.stderr)
            return 2
        report = report_folder("baselines")
        try:
            changes = []
            for chapter in selected:
                check_chapter(chapter)
                changes += baseline_changes(chapter, report_dir=report)
        except (ValueError, FileNotFoundError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        page = write_report(changes, report, "What rewriting the baselines changes")
        changed = [c for c in changes if not c.ok]
        for c in changed:
            rms = "" if c.rms is None else f", image RMS {c.rms:.2f}"
            print(f"  {c.chapter}/{c.figure}: largest relative change "
                  f"{c.largest_relative_change:.3g}{rms}; {c.problems[0]}")
        print(f"{len(changed)} of {len(changes)} figures would change; report: {page}")
        if not (args.all or args.figures):
            print("nothing rewritten: name the figures (--figures) or pass --all")
            return 0
        try:
            for chapter in selected:
                written = write_baselines(chapter, figures=args.figures)
                print(f"{chapter}: {len(written)} baseline files written")
        except (ValueError, FileNotFoundError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if args.command == "compare":
        from pathlib import Path

        from .runner import compare_with_reference

        for label, folder in (("reference", args.reference), ("candidate", args.candidate)):
            if not (Path(folder) / args.profile).is_dir():
                print(f"error: no {args.profile}-profile results in the {label} folder "
                      f"{folder!r} (expected {folder}/{args.profile}/)", file=sys.stderr)
                return 2
        return compare_with_reference(args.chapters or chapters(), args.reference,
                                      args.candidate, args.profile, args.tolerances,
                                      args.summary, args.report)
    if args.command == "stale":
        from .verify import recompute_command, stale_entries

        stale_list = stale_entries(args.profile, args.chapters or None)
        if not stale_list:
            print(f"no stale {args.profile}-profile results")
            return 0
        by_chapter: dict[str, list[dict]] = {}
        for item in stale_list:
            by_chapter.setdefault(item["chapter"], []).append(item)
        for chapter, items in by_chapter.items():
            reasons = sorted({i["reason"] for i in items})
            print(f"{chapter}: {len(items)} stale ({'; '.join(reasons)})\n"
                  f"  recompute: {recompute_command(chapter, args.profile)}")
        print(f"{len(stale_list)} stale {args.profile}-profile results")
        return 1
    if args.command == "recompute":
        import json
        from pathlib import Path

        from .verify import cheapest_entries, load_tolerances, recompute

        entries = cheapest_entries(args.chapters or None, args.profile)
        if not entries:
            print(f"error: no committed {args.profile}-profile results to recompute",
                  file=sys.stderr)
            return 2
        tolerances = load_tolerances(Path(args.tolerances) if args.tolerances else None)
        report = recompute(entries, tolerances)
        for row in report["tasks"]:
            status = "ok" if not row["problems"] else f"{len(row['problems'])} mismatches"
            print(f"  {row['fn']:<55} {row['seconds']:>7.1f} s  {status}")
            for problem in row["problems"][:5]:
                print(f"      {problem}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(report, handle, indent=1)
        return 0 if report["ok"] else 1
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
