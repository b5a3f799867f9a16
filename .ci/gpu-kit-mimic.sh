#!/usr/bin/env bash
# The dry run of the offline GPU kit without a GPU: a Python 3.12 environment that mimics the GPU
# machine's image (.ci/gpu-image-packages.txt), in the git-ignored .venv-gpu-mimic/, then the kit
# run in it on the CPU:
#
#   PYTHON312=/path/to/python3.12 .ci/gpu-kit-mimic.sh        # builds the mimic (once)
#   GPU_KIT_PYTHON=.venv-gpu-mimic/bin/python bash gpu-kit/run.sh --device cpu
#
# The mimic holds the image's own torch build, torch 2.11.0 with CUDA 13 from PyPI, with the CUDA
# libraries it requires (about 5 GB installed: `import torch` needs them even without a GPU; the
# `--no-deps` wheel alone fails on libcudnn), and the image's other packages at the versions of
# requirements.lock (numpy 2.4.6 where the image has 2.5: PyPI has no numpy 2.5). What it cannot
# mimic: a GPU (torch.cuda.is_available() is False, so the run uses --device cpu and computes no
# device task), and the image's exact versions of pandas, scipy, matplotlib and the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON312:-python3.12}"
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' || {
  echo "error: $PY is not Python 3.12 (set PYTHON312)" >&2; exit 2; }
VENV=.venv-gpu-mimic
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
LOCK=$(mktemp)
grep -v '^#' requirements.lock > "$LOCK"
"$VENV/bin/python" -m pip install -q torch==2.11.0 numpy scipy pandas matplotlib seaborn joblib tqdm \
  pyyaml filelock -c "$LOCK"
rm -f "$LOCK"
"$VENV/bin/python" -c "import torch; print('mimic:', torch.__version__, 'CUDA', torch.version.cuda, 'available:', torch.cuda.is_available())"
