"""Command line: `python -m implicit_bias {run,status,stale,recompute,data,status-page,
baselines,compare,new-chapter}`.

Only what builds the parser is imported at start-up (so `--help` answers at once); each command
imports what it needs (torch, pandas, papermill, the chapter modules) when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .core.engine.paths import project_root
from .core.tools.failures import check_claims_reports, exit_code_table, guarded, take_sigterm

# implicit_bias.core.engine.profiles.PROFILES, not imported here (jsonschema, for `--help`)
PROFILES = ("smoke", "paper")

EXAMPLES = """examples:
  python -m implicit_bias run gln_norm                      # one chapter, smoke profile
  python -m implicit_bias run --profile paper --device cuda # every chapter, the papers' protocol
  python -m implicit_bias run gln_norm --profile paper --set seeds=[0,1] --set n_steps=400
  python -m implicit_bias run gln_norm --profile my_profile.yaml
  python -m implicit_bias status --profile paper            # the claims dashboard
  python -m implicit_bias stale                             # committed results the code changed
  python -m implicit_bias new-chapter my_paper --title "..." --paper bibkey  # a new chapter
  python -m implicit_bias run --help                        # the options of a command
"""

RUN_EXAMPLES = """A custom profile (--set, or a profile file) is validated by the chapter's schemas
(data/schemas/) before anything runs; its results, claims, figures and executed notebook go to
results/custom/<name>/ (the file's name, or <profile>-<hash of the overrides>), never to
results/smoke, results/paper or the book. A profile file holds one profile, under the name of
the profile it changes (like one half of data/profiles/<chapter>.yaml); keys it leaves out are
that profile's.

examples:
  python -m implicit_bias run gln_norm --profile smoke --device cpu
  python -m implicit_bias run untied_diagonal --profile paper --device cuda --refresh
  python -m implicit_bias run gln_norm --profile paper --set seeds=[0,1] --set n_steps=400
  python -m implicit_bias run untied_diagonal --set theorem1.seeds=[0,1]   # a nested key
  python -m implicit_bias run gln_norm --profile two_seeds.yaml
"""


def _chapter_ids() -> str:
    """The chapters that can be run (their notebooks), cheaply: no import of the library."""
    found = sorted(p.stem for p in (project_root() / "notebooks").glob("*.md"))
    return ", ".join(found) or "none found"


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="python -m implicit_bias",
        formatter_class=raw,
        description="The implicit-bias-book runner: execute "
        "chapters, check claims, compare results.",
        epilog=f"{EXAMPLES}\n{exit_code_table()}",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="execute chapters with papermill into book/chapters/",
        description="Execute chapters (default: all of the book) with "
        "papermill into book/chapters/<chapter>.ipynb,\ncheck their claims, "
        "and exit non-zero naming what failed.",
        epilog=RUN_EXAMPLES,
        formatter_class=raw,
    )
    run.add_argument(
        "chapters",
        nargs="*",
        metavar="CHAPTER",
        help=f"chapters to run (default: all in the book): {_chapter_ids()}",
    )
    run.add_argument(
        "--profile",
        default="smoke",
        metavar="PROFILE",
        help=f"one of: {', '.join(PROFILES)}; or a profile file (.yaml) of one "
        "chapter (default: smoke)",
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter of the profile (VALUE read as YAML, KEY may be "
        "dotted: theorem1.n=10); repeatable",
    )
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    run.add_argument("--refresh", action="store_true", help="ignore cached results")
    run.add_argument("--log-output", action="store_true", help="stream cell output")
    run.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="chapters executed at the same time, each in its own process (default 1; "
        "tasks run one thread each, so up to the number of cores pays off)",
    )
    status = sub.add_parser("status", help="print the claims dashboard")
    status.add_argument("--profile", choices=PROFILES, default=None)
    sub.add_parser("status-page", help="write book/status.md")
    base = sub.add_parser(
        "baselines",
        help="report what would change in tests/baselines, "
        "then rewrite the figures named (or all, with --all)",
    )
    base.add_argument("chapters", nargs="*", metavar="CHAPTER")
    base.add_argument(
        "--figures",
        nargs="+",
        default=None,
        metavar="FIGURE",
        help="rewrite only these figures (of a single chapter)",
    )
    base.add_argument("--all", action="store_true", help="rewrite every figure of the chapters")
    base.add_argument(
        "--this-cpu",
        action="store_true",
        help="write the named figures into this CPU vendor's baseline folder "
        "(tests/baselines/<chapter>/cpu-<vendor>/): for figures whose data the vendors "
        "compute differently under the pinned kernels",
    )
    compare = sub.add_parser(
        "compare",
        help="compare a run's figures and claims with a reference results folder (GPU CI)",
    )
    compare.add_argument("chapters", nargs="*", metavar="CHAPTER")
    compare.add_argument("--reference", default="results", help="reference results root")
    compare.add_argument("--candidate", required=True, help="regenerated results root")
    compare.add_argument("--profile", default="paper", choices=PROFILES)
    compare.add_argument("--tolerances", default=None, help="YAML: chapter -> figure -> tols")
    compare.add_argument("--summary", default=None, help="write the JSON summary here")
    compare.add_argument(
        "--report",
        default=None,
        help="folder of the figure report (default: CANDIDATE/reports/figures-PROFILE)",
    )
    stale = sub.add_parser(
        "stale",
        help="list committed results that the current code would "
        "not produce, with the command that recomputes them",
    )
    stale.add_argument("chapters", nargs="*", metavar="CHAPTER")
    stale.add_argument("--profile", default="paper", choices=PROFILES)
    recompute = sub.add_parser(
        "recompute",
        help="recompute the cheapest committed task of "
        "every task function and compare within the measured "
        "tolerances (data/tolerances/recompute.yaml)",
    )
    recompute.add_argument("chapters", nargs="*", metavar="CHAPTER")
    recompute.add_argument(
        "--profile",
        nargs="+",
        default=["paper"],
        choices=PROFILES,
        help="the committed results to draw from (several: the cheapest task of each code "
        "path among them; the smoke cache is committed too)",
    )
    recompute.add_argument(
        "--json", default=None, help="write the report (with the deviations of every output) here"
    )
    recompute.add_argument(
        "--tolerances",
        default=None,
        help="tolerances file (default: data/tolerances/recompute.yaml)",
    )
    recompute.add_argument(
        "--functions",
        nargs="+",
        default=None,
        metavar="FN",
        help="only these task functions (module:name or name)",
    )
    recompute.add_argument(
        "--share",
        default=None,
        metavar="DIR",
        help="a work queue shared with other recompute processes given the same tasks: each "
        "task is recomputed by the first process to reach it (heaviest first)",
    )
    claims = sub.add_parser(
        "claims",
        help="claims commands: `claims registered` shows, from git, whether each claim was "
        "committed before the first commit that stored its paper value; `claims plan` writes "
        "data/seed_plans/<chapter>.yaml, the confirmatory seeds of each claim decided over "
        "seeds, from its committed exploratory paper results (commit it before the run)",
    )
    claims.add_argument("action", choices=["registered", "plan"])
    claims.add_argument("chapters", nargs="*", metavar="CHAPTER")
    colab = sub.add_parser(
        "colab",
        help="write colab/<id>.ipynb, the chapters as Colab opens them, from their sources, "
        "and CITATION.cff's repository-code, from `repository: url` of _config.yml (after "
        "editing a chapter's notebooks/<id>.md or that address); --check lists the outdated ones",
    )
    colab.add_argument("chapters", nargs="*", metavar="CHAPTER")
    colab.add_argument("--check", action="store_true", help="write nothing; exit 1 if outdated")
    data = sub.add_parser("data", help="fetch and verify the datasets")
    data.add_argument("datasets", nargs="*", default=None)
    new = sub.add_parser(
        "new-chapter",
        help="create a chapter (notebook, claims, profiles, "
        "package, model, tests, table-of-contents entry) from the template",
    )
    new.add_argument("chapter", help="the chapter id (lowercase, underscores): names its files")
    new.add_argument("--title", default=None, help="the chapter's title")
    new.add_argument(
        "--paper",
        default="zhang2017understanding",
        help="the book/references.bib key of the paper it reproduces "
        "(default: the template's example)",
    )
    return parser


def custom_profiles(args) -> tuple[list[str], dict]:
    """The chapters `run` selected and, per chapter, its custom profile (None for a standard
    profile), every one validated before anything runs; raises ValueError (the schema's
    message for a bad key or value)."""
    from .core.engine.overrides import custom_profile
    from .core.tools.runner import validate, validate_device

    from_file = args.profile not in PROFILES
    if from_file and not Path(args.profile).is_file():
        raise ValueError(
            f"unknown profile {args.profile!r}; valid: {', '.join(PROFILES)}, or "
            "a profile file (path/to/file.yaml)"
        )
    selected = validate(args.chapters, PROFILES[0] if from_file else args.profile)
    if not selected:
        raise ValueError(
            f"no chapter to run: {project_root() / '_toc.yml'} lists no book/chapters/<id> "
            "entry; name the chapters (python -m implicit_bias run CHAPTER)"
        )
    if from_file and len(selected) != 1:
        raise ValueError(
            "a profile file holds the profile of one chapter: name it "
            f"(python -m implicit_bias run CHAPTER --profile {args.profile})"
        )
    customs, problems = {}, []
    for chapter in selected:
        try:
            customs[chapter] = custom_profile(chapter, args.profile, args.set)
        except ValueError as err:
            problems.append(str(err))
    if problems:
        raise ValueError("\n".join(problems))
    validate_device(args.device)  # last: `auto` imports torch
    return selected, customs


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def main(argv=None) -> int:
    """The command line; every failure a user can meet as one line and its exit code
    (`core.tools.failures`)."""
    return guarded(_main, argv)


def _main(argv=None) -> int:
    take_sigterm()
    parser = build_parser()
    args = parser.parse_args(argv)
    from .core.engine.paths import ResultsPathError, export_results_root

    try:  # absolute for the kernels (they run in the project root), and a folder
        export_results_root()
    except ResultsPathError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    if args.command == "run":
        from .core.engine.overrides import shown
        from .core.tools.run_safety import take_sigterm_as_interrupt

        take_sigterm_as_interrupt()
        try:
            selected, customs = custom_profiles(args)
        except ValueError as err:
            print(f"error: {_cut(str(err))}", file=sys.stderr)
            return 2
        failed, bad_claims, done, bad_input = [], [], [], []

        def start(chapter: str) -> tuple:
            custom = customs[chapter]
            profile = custom.base if custom else args.profile
            changed = f" with {custom.source}" if custom else ""
            print(
                f"running {chapter} (profile {profile}{changed}, device {args.device}) ...",
                flush=True,
            )
            return (chapter, profile, args.device, args.refresh, args.log_output, custom)

        def report(chapter: str, summary: dict) -> None:
            custom = customs[chapter]
            profile = custom.base if custom else args.profile
            results = f"{shown(custom.root)}/{profile}" if custom else f"results/{profile}"
            claims = summary["claims"] or {}
            if summary.get("promoted"):
                done.append(chapter)
            print(
                f"  {chapter}: {'ok' if summary['ok'] else 'FAILED'} in "
                f"{summary['seconds']:.0f} s; claims: "
                + (", ".join(f"{n} {s}" for s, n in sorted(claims.items())) or "none"),
                flush=True,
            )
            tasks = summary["tasks"]
            print(
                f"  tasks: {tasks['computed']} computed, {tasks['cached']} from the cache, "
                f"{tasks['failed']} failed",
                flush=True,
            )
            for error in tasks["errors"][:5]:
                params = {k: v for k, v in error["task"].items() if k != "device"}
                print(
                    f"  failed task ({error['sweep']}) {params}: "
                    f"{error['error'].strip().splitlines()[-1]}",
                    file=sys.stderr,
                )
            if summary.get("disk_full") or summary.get("worker_killed"):
                print(f"  error: {summary['error']}", file=sys.stderr)
                failed.append(chapter)
            elif "CacheEntryError" in str(summary.get("error")):  # the user's to mend
                print(f"  error: {_cut(summary['error'])}", file=sys.stderr)
                bad_input.append(chapter)
            elif not summary["ok"]:
                kept = summary.get("failed_notebook")
                print(
                    f"  error: {_cut(summary['error'])}"
                    + (f"\n  the failed execution is kept at {kept}" if kept else ""),
                    file=sys.stderr,
                )
                failed.append(chapter)
            elif not summary["claims_ok"]:
                bad = summary["bad_claims"] or ["no claims report written"]
                print(f"  claims not as expected in {chapter}: " + "; ".join(bad), file=sys.stderr)
                bad_claims.append(chapter)
            if summary["ok"] and summary.get("not_promoted"):
                print(
                    f"  the results of {chapter} are left as they were: {summary['not_promoted']}",
                    file=sys.stderr,
                )
            if custom:
                print(
                    f"  results: {results}/ (executed notebook: {shown(custom.notebook)})",
                    flush=True,
                )
            if summary.get("native_results"):
                print(
                    f"  computed with the libraries' own kernels ({summary.get('kernels')}), not "
                    f"the book's pinned ones: everything went to {summary['native_results']}/, "
                    "never over the pinned results or the book",
                    flush=True,
                )
            if summary.get("promoted") and summary.get("replaced_entries"):
                print(
                    f"  replaced {summary['replaced_entries']} cached result(s) in "
                    f"{summary.get('native_results') or results}/{chapter}/ by the ones this "
                    "run computed again",
                    flush=True,
                )

        try:
            _run_all(args, selected, customs, start, report)
        except KeyboardInterrupt as err:
            import logging
            import signal

            # The interrupted kernel's pending asyncio tasks report themselves when the
            # interpreter exits; the run folder's kernel.log has what they would say.
            logging.getLogger("asyncio").disabled = True
            chapter = getattr(err, "chapter", None)
            term = getattr(err, "signal", None) == signal.SIGTERM or type(err).__name__ == "Stopped"
            finished = (getattr(err, "summary", None) or {}).get("promoted")
            if finished and chapter not in done:  # stopped while it swapped in: it completed
                done.append(chapter)
                chapter = None
            kept = (
                f"{', '.join(done)} completed and its results were kept; "
                if len(done) == 1
                else f"{', '.join(done)} completed and their results were kept; "
                if done
                else ""
            )
            print(
                f"\n{'stopped by SIGTERM' if term else 'interrupted'}"
                f"{f' in {chapter}' if chapter else ''}: {kept}"
                + (
                    "the results it computed again were discarded (a cached result is replaced "
                    "only by a complete run); no result was changed"
                    if args.refresh
                    else "the tasks finished so far are cached and a rerun resumes from them; "
                    "no result was changed"
                )
                + (" by the run that was stopped" if done else ""),
                file=sys.stderr,
            )
            return 143 if term else 130
        except PermissionError as err:
            print(
                f"error: cannot write {err.filename or 'the results'}: permission denied (is "
                "the results folder read-only? set IMPLICIT_BIAS_RESULTS to a writable folder)",
                file=sys.stderr,
            )
            return 2
        except OSError as err:
            if type(err).__name__ != "DiskSpaceError":
                raise  # one line from `guarded`
            print(f"error: {_cut(str(err))}", file=sys.stderr)
            return 1
        if bad_input and not (failed or bad_claims):
            print(
                f"error: cache entries of {', '.join(bad_input)} are not this code's (above)",
                file=sys.stderr,
            )
            return 2
        if failed or bad_claims or bad_input:
            print(
                f"error: {len(failed + bad_input)} chapter(s) failed to execute "
                f"{failed + bad_input}, "
                f"{len(bad_claims)} with claims not as expected {bad_claims}",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.command == "status":
        from .core.tools.runner import format_status

        check_claims_reports((args.profile,) if args.profile else PROFILES)
        print(format_status((args.profile,) if args.profile else PROFILES))
        return 0
    return _other_commands(args)


def _run_all(args, selected, customs, start, report) -> None:
    from .core.tools.runner import run_chapter

    if args.jobs > 1 and len(selected) > 1 and not any(customs.values()):
        from .core.tools.jobs import run_jobs

        run_jobs(args.jobs, selected, start, report)
    else:
        for chapter in selected:
            report(chapter, run_chapter(*start(chapter)))


def _cut(text: str, limit: int = 2000) -> str:
    """An error message of at most `limit` characters per line (a long value echoed back)."""
    return "\n".join(
        line if len(line) <= limit else f"{line[: limit - 40]} ... ({len(line)} characters)"
        for line in str(text).splitlines()
    )


def _other_commands(args) -> int:
    if getattr(args, "chapters", None) and args.command in ("stale", "compare", "recompute"):
        from .core.chapter import check_chapter

        try:
            for chapter in args.chapters:
                check_chapter(chapter)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    for option in ("tolerances",):
        given = getattr(args, option, None)
        if given and not Path(given).is_file():
            print(f"error: no {option} file {given!r}", file=sys.stderr)
            return 2
    if args.command == "claims":
        from .core.chapter import chapters, check_chapter
        from .core.verdicts.registration import HistoryError, format_registrations

        try:
            selected = [check_chapter(c) for c in args.chapters] or chapters()
            if args.action == "plan":
                from .core.verdicts.claims import write_seed_plans

                for chapter in selected:
                    written = write_seed_plans(chapter)
                    print(written or f"{chapter}: no claim decided over seeds, no plan")
                return 0
            print(format_registrations(selected))
        except (ValueError, HistoryError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if args.command == "status-page":
        import os

        from .core.engine.paths import RESULTS_ENV, results_root
        from .core.site.status_page import dashboard_rows, write_readme_counts, write_status_page

        # the dashboard of another results folder goes beside it, never into the book (nor
        # its counts into the README, which counts the committed paper results)
        elsewhere = os.environ.get(RESULTS_ENV)
        check_claims_reports(PROFILES)
        print(write_status_page(results_root() / "status.md" if elsewhere else None))
        if not elsewhere and write_readme_counts(dashboard_rows(("paper",))):
            print("README.md: the counts of the committed paper results written again")
        return 0
    if args.command == "baselines":
        from .core.chapter import chapters, check_chapter
        from .core.site.regression import (
            baseline_changes,
            report_folder,
            write_baselines,
            write_report,
        )

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
            print(
                f"  {c.chapter}/{c.figure}: largest relative change "
                f"{c.largest_relative_change:.3g}{rms}; {c.problems[0]}"
            )
        print(f"{len(changed)} of {len(changes)} figures would change; report: {page}")
        if not (args.all or args.figures):
            print("nothing rewritten: name the figures (--figures) or pass --all")
            return 0
        try:
            for chapter in selected:
                written = write_baselines(chapter, figures=args.figures, this_cpu=args.this_cpu)
                print(f"{chapter}: {len(written)} baseline files written")
        except (ValueError, FileNotFoundError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if args.command == "compare":
        from .core.chapter import chapters
        from .core.site.regression import ToleranceFileError, load_figure_tolerances
        from .core.tools.runner import compare_with_reference

        try:
            tolerances = load_figure_tolerances(Path(args.tolerances)) if args.tolerances else {}
        except ToleranceFileError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        for label, folder in (("reference", args.reference), ("candidate", args.candidate)):
            if not (Path(folder) / args.profile).is_dir():
                print(
                    f"error: no {args.profile}-profile results in the {label} folder "
                    f"{folder!r} (expected {folder}/{args.profile}/)",
                    file=sys.stderr,
                )
                return 2
            check_claims_reports((args.profile,), Path(folder))
        return compare_with_reference(
            args.chapters or chapters(),
            args.reference,
            args.candidate,
            args.profile,
            tolerances,
            args.summary,
            args.report,
        )
    if args.command == "stale":
        from .core.engine.paths import results_root, shown_path
        from .core.engine.sweep import committed_entries
        from .core.tools.verify import recompute_command, stale_entries

        if next(committed_entries(args.profile, args.chapters or None), None) is None:
            where = shown_path(results_root() / args.profile)
            print(
                f"error: no {args.profile}-profile results in {where}"
                + (f" for {', '.join(args.chapters)}" if args.chapters else "")
                + ": nothing to check",
                file=sys.stderr,
            )
            return 2
        stale_list = stale_entries(args.profile, args.chapters or None)
        if not stale_list:
            print(f"no stale {args.profile}-profile results")
            return 0
        by_chapter: dict[str, list[dict]] = {}
        for item in stale_list:
            by_chapter.setdefault(item["chapter"], []).append(item)
        for chapter, items in by_chapter.items():
            reasons = sorted({i["reason"] for i in items})
            print(
                f"{chapter}: {len(items)} stale ({'; '.join(reasons)})\n"
                f"  recompute: {recompute_command(chapter, args.profile)}"
            )
        print(f"{len(stale_list)} stale {args.profile}-profile results")
        return 1
    if args.command == "recompute":
        import json

        from .core.tools.verify import (
            cheapest_entries,
            checked_tolerances,
            claim_in,
            recompute,
        )

        # every input before the recompute, which may take hours: the tolerances, --json's folder
        tolerances = checked_tolerances(Path(args.tolerances) if args.tolerances else None)
        if args.json and not Path(args.json).resolve().parent.is_dir():
            print(f"error: --json {args.json}: no folder {Path(args.json).parent}", file=sys.stderr)
            return 2
        entries = cheapest_entries(args.chapters or None, tuple(args.profile))
        if args.functions:
            wanted = set(args.functions)
            known = sorted({e[2]["fn"] for e in entries})
            found = {n for e in entries for n in (e[2]["fn"], e[2]["fn"].split(":")[-1])}
            unknown = sorted(wanted - found)
            if unknown and entries:
                print(
                    f"error: no task function {', '.join(unknown)} among the committed "
                    f"{'/'.join(args.profile)}-profile results; they hold: "
                    + _cut(", ".join(n.split(":")[-1] for n in known), 600),
                    file=sys.stderr,
                )
                return 2
            entries = [e for e in entries if {e[2]["fn"], e[2]["fn"].split(":")[-1]} & wanted]
        if not entries:
            print(
                f"error: no committed {'/'.join(args.profile)}-profile results to recompute",
                file=sys.stderr,
            )
            return 2
        if args.share:  # the longest first, so that the processes finish together
            entries = entries[::-1]
        claim = claim_in(Path(args.share)) if args.share else None
        report = recompute(entries, tolerances, claim=claim)
        for row in report["tasks"]:
            status = "ok" if not row["problems"] else f"{len(row['problems'])} mismatches"
            print(f"  {row['fn']:<55} {row['seconds']:>7.1f} s  {status}")
            for problem in row["problems"][:5]:
                print(f"      {problem}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(report, handle, indent=1)
        return 0 if report["ok"] else 1
    if args.command == "new-chapter":
        from .core.tools.scaffold import ScaffoldError, new_chapter

        try:
            written = new_chapter(args.chapter, args.title, args.paper)
        except ScaffoldError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        root = project_root()
        print(f"created chapter {args.chapter}:")
        for path in written:
            print(f"  {path.relative_to(root) if path.is_relative_to(root) else path}")
        print(
            f"next: write its claims from the paper, then `python -m implicit_bias run "
            f"{args.chapter}` (CONTRIBUTING.md, 'Adding a paper')"
        )
        return 0
    if args.command == "colab":
        from .core.chapter import chapters, check_chapter
        from .core.site import colab, repository

        try:
            selected = [check_chapter(c) for c in args.chapters] or chapters()
            repository.repository_url()  # a placeholder address stops here
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if args.check:
            outdated = colab.outdated(selected)
            for chapter in outdated:
                print(f"{colab.FOLDER}/{chapter}.ipynb: out of date (make colab)")
            citation = repository.citation_outdated()
            if citation:
                print(f"{repository.CITATION}: its repository-code is not the address (make colab)")
            return 1 if outdated or citation else 0
        written = colab.write(selected)
        cited = repository.write_citation()
        print(f"{len(written)} written, {len(selected) - len(written)} up to date")
        if cited:
            print(f"{repository.CITATION}: repository-code written")
        return 0
    if args.command == "data":
        from .core.engine.data import DATASETS, DataError, fetch

        unknown = [n for n in args.datasets or () if n not in DATASETS]
        if unknown:
            print(
                f"error: unknown dataset {', '.join(map(repr, unknown))}; valid: "
                f"{', '.join(DATASETS)}",
                file=sys.stderr,
            )
            return 2
        try:
            for name in args.datasets or DATASETS:
                fetch(name)
        except (DataError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    return 2


if __name__ == "__main__":
    code = main()
    # all is done and said: a Ctrl-C now would end the interpreter's exit silently, with 130
    import signal

    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_IGN)
    sys.exit(code)
