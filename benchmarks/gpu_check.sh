#!/usr/bin/env bash
# The GPU checks of robattr in one go (issue 17): run from the repository root on a
# machine with a CUDA GPU, in an environment where `make test` passes.
#
#     bash benchmarks/gpu_check.sh [OUT_DIR]        (default: $OUT, else gpu-check/)
#
# Steps, in the order of what matters most if time runs out:
# 1. `pytest -m cuda` (every method, attack, loss, bound and the zoo on CUDA vs the CPU;
#    the measured differences go to cuda_report.csv) and, at the same time, every
#    quick-profile notebook with `device: auto` (`robattr build --profile
#    benchmarks/gpu_quick.yml --no-html --force`: the quick profile, device auto). Each
#    notebook's stamp is written when it ends, so a run cut short still says which ran;
# 2. then, alone on the GPU, the benchmarks: attributions (robattr vs Captum, chunk rows,
#    the fp32/TF32 precision check), RelEx (ResNet-50 at 224x224: precision and memory
#    format, the masks' agreement with fp32) and training cost (003's LeNet losses and
#    000's ResNet-20 losses, relative to CE and to AT).
#
# Time: everything ends within GPU_CHECK_BUDGET seconds (default 480), so that one call of
# a lent GPU machine (at most 600 s a command, 15 minutes of device time a session, the
# machine's start included) holds the whole check with time left for a rerun. Each step
# gets a share of the budget and never more than what is left. A failing step does not
# stop the others; the exit status is the number of failed steps. Logs: at most seven
# files in OUT_DIR (summary.txt first), which is what such a machine sends back.
#
# On this workplace's lent machine (bare PyTorch): the packages it lacks travel as wheels
# in .whl/ (benchmarks/gpu_wheels.sh fills it; the folder is git-ignored), and the call is
#     carry: [".whl"], timeout_s: 600, command:
#     python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site && bash benchmarks/gpu_check.sh
#
# GPU_CHECK_DRY_RUN=1 runs every step on the CPU with tiny sizes and the example chapter
# only (a check of this script, not of the GPU: tests/book/test_gpu_check.py runs it). The
# notebooks are built into $ROBATTR_ROOT/book when ROBATTR_ROOT is set, else into ./book.
set -u
OUT_DIR=${1:-${OUT:-gpu-check}}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-480}
DRY=${GPU_CHECK_DRY_RUN:-0}
export PYTHONUNBUFFERED=1 ROBATTR_CACHE=${ROBATTR_CACHE:-/tmp/robattr-gpu-cache}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
START=$SECONDS
failed=0
: >"$OUT_DIR/summary.txt"

left() { echo $((BUDGET - (SECONDS - START))); }
share() {  # share PERCENT: that share of the budget, capped by the time left (>= 1 s)
    local s=$((BUDGET * $1 / 100)) l
    l=$(left)
    [ "$s" -gt "$l" ] && s=$l
    [ "$s" -lt 1 ] && s=1
    echo "$s"
}
step() {  # step NAME SECONDS CMD...: run CMD within SECONDS, log to OUT_DIR/NAME.log
    local name=$1 budget=$2; shift 2
    local t0=$SECONDS rc
    timeout "$budget" "$@" >"$OUT_DIR/$name.log" 2>&1
    rc=$?
    local why=""
    [ $rc -eq 124 ] && why=" (stopped at its ${budget} s budget)"
    echo "$name: exit $rc in $((SECONDS - t0)) s$why" | tee -a "$OUT_DIR/summary.txt"
    [ $rc -eq 0 ] || failed=$((failed + 1))
    return $rc
}

if [ "$DRY" = 1 ]; then
    DEV=cpu
    NB_PROFILE=smoke
    NB_ONLY=(--only 'example/*')
    PYTEST_ENV=(env ROBATTR_CUDA_TEST_DEVICE=cpu)
    PYTEST_SEL=(-k "grad and float64 and mlp")
    ATTR_ARGS=(--models lenet --batch 2 --steps 4 --repeats 1)
    RELEX_ARGS=(--quick --n-images 2 --loop-images 1 --epochs 2 --copies 2)
    TRAIN_ARGS=(--steps 1 --batch-size 8 --n 64)
    TRAIN_WANG2020=(--archs cnn --losses ssr)
    TRAIN_JOO2023=(--archs cnn --losses l2_cosd)
else
    DEV=cuda
    NB_PROFILE=benchmarks/gpu_quick.yml
    NB_ONLY=()
    PYTEST_ENV=(env)
    PYTEST_SEL=()
    ATTR_ARGS=(--tv224)
    RELEX_ARGS=(--resnet --resnet-images 1 --n-images 8 --loop-images 2)
    TRAIN_ARGS=(--steps 2)
    TRAIN_WANG2020=(--archs resnet20 --losses ssr ig_norm)
    TRAIN_JOO2023=(--archs lenet resnet18_cifar --losses l2_cosd hessian)
fi

$PY - "$DEV" "$BUDGET" >>"$OUT_DIR/summary.txt" 2>&1 <<'EOF'
import sys
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NO GPU",
      f"| device {sys.argv[1]}, budget {sys.argv[2]} s")
EOF
cat "$OUT_DIR/summary.txt"

# 1. correctness: the cuda tests and the 25 notebooks, side by side (the tests are small)
NB_BUDGET=$(share 55)
step notebooks "$NB_BUDGET" $PY -m robattr.book.cli build --profile "$NB_PROFILE" --no-html \
    --force --no-progress --jobs 6 "${NB_ONLY[@]}" &
nb=$!
ROBATTR_CUDA_REPORT="$OUT_DIR/cuda_report.csv" step pytest_cuda "$(share 35)" \
    "${PYTEST_ENV[@]}" $PY -m pytest -q -m cuda -p no:cacheprovider "${PYTEST_SEL[@]}" \
    tests/library/test_cuda.py
wait $nb || failed=$((failed + 1))
$PY - "$OUT_DIR" "${ROBATTR_ROOT:-.}" "${NB_ONLY[@]}" <<'EOF'
import fnmatch, json, sys
from pathlib import Path
root = Path(sys.argv[2])
stamps_file = root / "book" / ".robattr-stamps.json"
stamps = json.loads(stamps_file.read_text()) if stamps_file.exists() else {}
keys = sorted(str(p.relative_to(root / "notebooks").with_suffix(""))
              for p in (root / "notebooks").rglob("*.ipynb"))
if len(sys.argv) > 4:
    keys = [k for k in keys if fnmatch.fnmatch(k, sys.argv[4])]
with open(Path(sys.argv[1]) / "summary.txt", "a") as f:
    done = [k for k in keys if k in stamps]
    print(f"notebooks executed on device auto: {len(done)} of {len(keys)}", file=f)
    for k in keys:
        print(f"  {k}: " + (f"{stamps[k].get('seconds', '?')} s" if k in stamps else "NOT DONE"), file=f)
EOF

# 2. benchmarks, one at a time, alone on the GPU
step bench_relex "$(share 15)" $PY benchmarks/relex.py --device "$DEV" "${RELEX_ARGS[@]}"
step bench_attributions "$(share 12)" $PY benchmarks/attributions.py --devices "$DEV" \
    --threads 0 "${ATTR_ARGS[@]}"
# training: 000's setting (ResNet-20: SSR and IG-NORM against AT) first, then 003's
step bench_training "$(share 100)" bash -c \
    "$PY benchmarks/training.py --device $DEV ${TRAIN_ARGS[*]} ${TRAIN_WANG2020[*]} &&
     $PY benchmarks/training.py --device $DEV ${TRAIN_ARGS[*]} ${TRAIN_JOO2023[*]}"

echo "total: $((SECONDS - START)) s of the $BUDGET s budget; failed steps: $failed" \
    | tee -a "$OUT_DIR/summary.txt"
exit $failed
