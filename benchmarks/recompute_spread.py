"""Measure how far committed paper results move on other CPUs, and derive the recompute
tolerances from it (`data/tolerances/recompute.yaml`).

The cheapest committed task of every task function is recomputed (`python -m implicit_bias
recompute`) under each configuration below: the measuring machine's own kernels and the BLAS
kernels other x86-64 CPUs select for numpy/scipy (`OPENBLAS_CORETYPE` Prescott, Sandybridge,
Haswell) and for torch (`MKL_CBWR`, `ATEN_CPU_CAPABILITY`), each with 1 and 2 threads
(`implicit_bias.core.tools.verify.KERNEL_CONFIGS`). For every output of every task function
the largest deviation from the committed value over all configurations is the measured spread, and

    rtol = 10 x (largest relative deviation of the values of the output's own scale), >= 1e-10
    atol = 10 x (largest absolute deviation of its small values), at least 1e-15

where a value is small below max(1e-9, 1e-3 x the output's largest |value|) (round-off-level
residuals and solver-tolerance-level errors, a vector's tiny components: their relative change
says nothing; `implicit_bias.core.tools.verify.SMALL`), each rounded up
to one significant digit. The factor 10 leaves room for CPUs whose kernels were not among those
measured (MKL's own code paths on Intel CPUs, newer ISAs), the floors for bit-level noise of
float64. Packed prediction signs may differ in at most 10 x the largest share of flipped
signs measured (`{signs: share}`); other outputs that are not numbers (statuses) must be
identical.

Usage: python benchmarks/recompute_spread.py [CHAPTER ...] [--profile smoke paper]
[--functions FN ...] [--reuse DIR] [--derive-only]
(writes the tolerances file and benchmarks/results/recompute_spread.md; the task functions it
did not measure keep their tolerances and rows, so one chapter can be measured on its own)
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from implicit_bias.core.tools.verify import KERNEL_CONFIGS as CONFIGS
from implicit_bias.core.tools.verify import compare_results, kernel_env

ROOT = Path(__file__).resolve().parents[1]
REL_FLOOR, ABS_FLOOR, FACTOR = 1e-10, 1e-15, 10.0
AMPLIFIED = 1e-3  # a relative spread above this is round-off amplified into the result
NO_TOLERANCE = {"default": {"rtol": 0.0, "atol": 0.0}, "functions": {}}


def run_configs(
    out: Path,
    chapters: list[str],
    parallel: int = 2,
    profiles: tuple[str, ...] = ("paper",),
    functions: tuple[str, ...] = (),
) -> None:
    """Each configuration in its own process, `parallel` at a time (reports of earlier calls
    for other chapters are kept: `derive` merges them)."""
    out.mkdir(parents=True, exist_ok=True)
    label = "-".join(chapters) or "all"
    empty = out / "no-tolerances.yaml"  # measure, do not judge
    empty.write_text("default: {rtol: 0.0, atol: 0.0}\nfunctions: {}\n")
    running = []
    for name in CONFIGS:
        report = out / f"{name}__{label}.json"
        if report.exists():
            continue
        env = kernel_env(name)
        log = open(out / f"{name}__{label}.log", "w")  # noqa: SIM115 - closed below
        cmd = [
            sys.executable,
            "-m",
            "implicit_bias",
            "recompute",
            *chapters,
            "--json",
            str(report),
            "--tolerances",
            str(empty),
            "--profile",
            *profiles,
            *(["--functions", *functions] if functions else []),
        ]
        running.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=log, cwd=ROOT), log))
        if len(running) >= parallel:
            proc, handle = running.pop(0)
            proc.wait()
            handle.close()
    for proc, handle in running:
        proc.wait()
        handle.close()


def machine() -> str:
    """The measuring CPU, and which kernels `native` means on it."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    flags = set(
        next(
            (
                line.split(":", 1)[1].split()
                for line in info.splitlines()
                if line.startswith("flags")
            ),
            [],
        )
    )
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "pre-AVX2"
    return (
        f"{model}, {isa} (`native` = this CPU's own kernels); committed results were "
        "computed natively on the machines of the sessions that committed them"
    )


def round_up(value: float) -> float:
    if value <= 0:
        return 0.0
    exponent = math.floor(math.log10(value))
    mantissa = math.ceil(value / 10**exponent - 1e-12)
    return mantissa * 10.0**exponent


def derive(out: Path) -> tuple[dict, list[str]]:
    spreads: dict[str, dict[str, dict]] = {}
    seconds: dict[str, float] = {}
    rows = [
        dict(row, config=name)
        for name in CONFIGS
        for path in sorted(out.glob(f"{name}__*.json"))
        for row in json.loads(path.read_text())["tasks"]
    ]
    for row in rows:  # the spread under today's rule, from the committed and recomputed values
        # the entry of the profile it was drawn from (its file name is its task's hash)
        entry = next(
            path
            for profile in ("paper", "smoke")
            if (path := ROOT / "results" / profile / row["chapter"] / row["file"]).exists()
        )
        committed = json.loads(entry.read_text())["result"]
        row["spread"] = compare_results(committed, row["result"], row["fn"], NO_TOLERANCE)[1]
        seconds[row["fn"]] = max(seconds.get(row["fn"], 0.0), row["seconds"])
        for key, s in row["spread"].items():
            worst = spreads.setdefault(row["fn"], {}).setdefault(
                key,
                {
                    "rel_of_large": 0.0,
                    "abs_of_small": 0.0,
                    "magnitude": 0.0,
                    "text": False,
                    "worst": "-",
                },
            )
            if s.get("text"):
                worst["text"] = True
                continue
            if "signs" in s:  # packed predicted signs: the share that flipped
                if s["signs"] > worst.get("signs", 0.0):
                    worst["signs"], worst["worst"] = s["signs"], row["config"]
                continue
            if s["rel_of_large"] > worst["rel_of_large"]:
                worst["worst"] = row["config"]
            for field in ("rel_of_large", "abs_of_small", "magnitude"):
                worst[field] = max(worst[field], s[field])
    functions, lines, amplified = {}, [], []
    for fn in sorted(spreads):
        section = {}
        for key, s in sorted(spreads[fn].items()):
            if s["text"]:
                lines.append(f"| {fn} | {key} | differs (text) | | |")
                continue
            if "signs" in s:
                share = round_up(FACTOR * s["signs"])
                section[key] = {"signs": share, "measured": f"share of signs {s['signs']:.2g}"}
                lines.append(
                    f"| {fn} | {key} | {s['signs']:.2g} of the signs ({s['worst']}) | | "
                    f"signs {share:g} |"
                )
                continue
            rtol = max(round_up(FACTOR * s["rel_of_large"]), REL_FLOOR)
            atol = max(round_up(FACTOR * s["abs_of_small"]), ABS_FLOOR)
            section[key] = {
                "rtol": rtol,
                "atol": atol,
                "measured": f"rel {s['rel_of_large']:.2g}, "
                f"abs of small values {s['abs_of_small']:.2g}",
            }
            if s["rel_of_large"] > AMPLIFIED:
                amplified.append(f"- `{fn}` `{key}`: {s['rel_of_large']:.2g} ({s['worst']})")
            lines.append(
                f"| {fn} | {key} | {s['rel_of_large']:.2g} ({s['worst']}) | "
                f"{s['abs_of_small']:.2g} | {rtol:g} / {atol:g} |"
            )
        functions[fn] = section
    return {"functions": functions, "seconds": seconds, "amplified": amplified}, lines


def previous_records(measured: set[str]) -> dict:
    """What the current tolerances file and record say about the task functions this run did
    not measure (other chapters, measured before): kept as they are, so that measuring one
    chapter leaves the others' tolerances in place. Functions that no longer exist are
    dropped."""
    from implicit_bias.core.engine.sweep import load_function

    kept: dict = {"blocks": {}, "rows": [], "amplified": [], "seconds": []}
    path = ROOT / "data" / "tolerances" / "recompute.yaml"
    if path.exists():
        current = None
        for line in path.read_text().splitlines():
            if line.startswith('  "') and line.rstrip().endswith('":'):
                current = line.strip()[1:-2]
                kept["blocks"][current] = []
            elif line.startswith('    "') and current is not None:
                kept["blocks"][current].append(line)
    for fn in list(kept["blocks"]):
        try:
            load_function(fn)
            gone = False
        except (ImportError, AttributeError, ValueError):
            gone = True
        if gone or fn in measured:
            del kept["blocks"][fn]
    record = ROOT / "benchmarks" / "results" / "recompute_spread.md"
    if record.exists():
        for line in record.read_text().splitlines():
            fn = line.split("`")[1] if line.startswith("- `") else line[2:].split(" |")[0]
            if fn not in kept["blocks"]:
                continue
            if line.startswith("- `"):
                kept["amplified"].append(line)
            elif line.count("|") == 3:
                kept["seconds"].append(line)
            elif line.startswith("| "):
                kept["rows"].append(line)
    return kept


def write(derived: dict, lines: list[str]) -> None:
    kept = previous_records(set(derived["functions"]))
    header = __doc__.split("Usage:")[0].strip().splitlines()
    text = [
        "# Recompute tolerances, derived by benchmarks/recompute_spread.py (do not edit by",
        "# hand: rerun it). " + " ".join(h.strip() for h in header[:1]),
        "#",
    ]
    text += [f"# {h}" if h else "#" for h in header[1:]]
    text += [
        "# Configurations: " + ", ".join(CONFIGS) + ".",
        "# Each entry: output -> rtol, atol, and the measured spread they come from.",
        f"default: {{rtol: {REL_FLOOR}, atol: {ABS_FLOOR}}}",
        "functions:",
    ]
    blocks = dict(kept["blocks"])
    for fn, section in derived["functions"].items():
        blocks[fn] = [
            (
                f'    "{key}": {{signs: {tol["signs"]:g}}}'
                if "signs" in tol
                else f'    "{key}": {{rtol: {tol["rtol"]:g}, atol: {tol["atol"]:g}}}'
            )
            + f"  # measured: {tol['measured']}"
            for key, tol in section.items()
        ]
    for fn in sorted(blocks):
        text.append(f'  "{fn}":')
        text += blocks[fn]
    path = ROOT / "data" / "tolerances" / "recompute.yaml"
    path.write_text("\n".join(text) + "\n")
    md = [
        "# Spread of recomputed paper results across CPU kernels and threads",
        "",
        "Configurations: " + ", ".join(f"`{c}`" for c in CONFIGS) + ". Rule: see "
        "`data/tolerances/recompute.yaml`.",
        "",
        f"Measured last on: {machine()}, for {', '.join(sorted(derived['functions']))}; the "
        "other rows are kept from earlier measurements (see the history of this file).",
        "",
        "| task function | output | max rel. deviation (worst configuration) "
        "| max abs. deviation of small values "
        "| rtol / atol |",
        "|---|---|---|---|---|",
        *sorted(lines + kept["rows"]),
        "",
        f"Outputs that amplify round-off (relative spread above {AMPLIFIED:g}): their "
        "recompute tolerance guards only against gross changes, and any result or claim "
        "resting on them depends on the CPU at this level (which claims it moves: "
        "`benchmarks/results/claim_sensitivity.md`):",
        "",
        *(sorted(derived["amplified"] + kept["amplified"]) or ["- none"]),
        "",
        "Recompute time of the cheapest task per function (largest over configurations):",
        "",
        "| task function | seconds |",
        "|---|---|",
    ]
    rows = [(s, f"| {fn} | {s:.1f} |") for fn, s in derived["seconds"].items()]
    rows += [(float(line.split("|")[2]), line) for line in kept["seconds"]]
    md += [line for _, line in sorted(rows, key=lambda r: -r[0])]
    (ROOT / "benchmarks" / "results" / "recompute_spread.md").write_text("\n".join(md) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", help="measure these chapters (default: all)")
    parser.add_argument(
        "--reuse",
        default="/tmp/recompute-spread",
        help="folder for the per-configuration reports (reused if present)",
    )
    parser.add_argument(
        "--profile",
        nargs="+",
        default=["paper"],
        choices=["smoke", "paper"],
        help="the committed results to measure (several: the cheapest entry of each code path "
        "among them, as the recompute test draws them; the smoke cache may hold another "
        "CPU vendor's entries, whose spread then includes the vendor's)",
    )
    parser.add_argument(
        "--functions", nargs="+", default=[], help="only these task functions (module:name)"
    )
    parser.add_argument(
        "--derive-only",
        action="store_true",
        help="derive the tolerances from the reports already in --reuse",
    )
    args = parser.parse_args()
    out = Path(args.reuse)
    if not args.derive_only:
        run_configs(
            out, args.chapters, profiles=tuple(args.profile), functions=tuple(args.functions)
        )
    derived, lines = derive(out)
    write(derived, lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
