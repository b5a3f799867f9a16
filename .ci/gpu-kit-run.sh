#!/usr/bin/env bash
# The offline GPU run kit's entry point (built by `make gpu-kit` as gpu-kit/run.sh): on a GPU
# machine whose image has Python 3.12, torch (CUDA), numpy, scipy, pandas, matplotlib and the
# rest of .ci/gpu-image-packages.txt, and no package index:
#
#   bash gpu-kit/run.sh [--part N] [--device cuda|cpu] [--budget SECONDS] [--out DIR]
#                       [--chapters "a b"]
#
# installs the wheels of every kit part present (gpu-kit/, gpu-kit-2/, ...) with
# `pip install --no-index --no-deps --target` into scratch folders (.gpu-kit-work/site-N, put on
# PYTHONPATH in front of the image's packages), unpacks and verifies the datasets, checks that
# torch sees CUDA (--device cpu: the dry run without a GPU), and runs the paper profile of the
# chapters that part N makes runnable (default 1), each within its share of the time budget,
# from a copy of the committed results/paper/ (only tasks that run on the device recompute).
# Writes to $OUT (or --out): summary.md, summary.json, gpu.csv, figure-report.tar.gz, run.log.
# Environment: GPU_KIT_PYTHON (default python3), GPU_KIT_WORK (default .gpu-kit-work: kept
# between commands on a warm machine, so part 2 finds part 1's install).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n 2,18p "$0"; exit 0 ;; esac
STARTED=$(date +%s)
KIT="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$KIT")"
cd "$ROOT"
PY="${GPU_KIT_PYTHON:-python3}"
WORK="${GPU_KIT_WORK:-$ROOT/.gpu-kit-work}"
[ -f "$KIT/kit.json" ] || { echo "error: $KIT/kit.json missing: build the kit with 'make gpu-kit'" >&2; exit 2; }
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' || {
  echo "error: the kit's wheels are for Python 3.12; $PY is $("$PY" -V 2>&1) (set GPU_KIT_PYTHON)" >&2; exit 2; }
mkdir -p "$WORK"
shopt -s nullglob
PARTS=()
for part in "$KIT" "$ROOT"/gpu-kit-[0-9]*; do
  [ -f "$part/part.json" ] && PARTS+=("$part")
done
# files too large for one part came in pieces: join those whose last piece is here
"$PY" "$ROOT/lib/implicit_bias/core/tools/kit_pieces.py" "$WORK" "${PARTS[@]}"
SITES=""
for part in "${PARTS[@]}"; do
  n=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["number"])' "$part/part.json")
  site="$WORK/site-$n"
  WHEELS=("$part"/wheels/*.whl)
  if [ ${#WHEELS[@]} -gt 0 ] && ! cmp -s "$part/part.json" "$site/.installed" 2>/dev/null; then
    echo "installing part $n's wheels (${#WHEELS[@]}) into $site ..."
    rm -rf "$site"
    if [ -z "${GPU_KIT_NO_PIP:-}" ] && "$PY" -m pip --version >/dev/null 2>&1; then
      "$PY" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check \
        --target "$site" "${WHEELS[@]}"
    else  # no pip in the image: a wheel is a zip of what pip would copy (its .data lib folders moved up)
      echo "  (pip is not available to $PY: unpacking the wheels)"
      "$PY" - "$site" "${WHEELS[@]}" <<'PYEOF'
import pathlib, shutil, sys, zipfile
site = pathlib.Path(sys.argv[1])
site.mkdir(parents=True, exist_ok=True)
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
for data in site.glob("*.data"):
    for lib in ("purelib", "platlib"):
        for item in (data / lib).glob("*"):
            shutil.move(str(item), str(site / item.name))
PYEOF
    fi
    cp "$part/part.json" "$site/.installed"
  fi
  SITES="$SITES${SITES:+:}$site"
done
# A part installed by an earlier command on this machine (its folder not carried this time).
for site in "$WORK"/site-[0-9]*; do
  [ -d "$site" ] && case ":$SITES:" in *":$site:"*) ;; *) SITES="$SITES${SITES:+:}$site" ;; esac
done
export PYTHONPATH="$SITES:$ROOT/lib${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m implicit_bias.core.tools.gpu_kit run --started "$STARTED" --work "$WORK" "$@"
