#!/usr/bin/env bash
# The GPU checks of robattr in one go (issue 17): run from the repository root on a
# machine with a CUDA GPU, in an environment where `make test` passes.
#
#     bash benchmarks/gpu_check.sh [OUT_DIR]        (default: gpu-check/)
#
# 1. `pytest -m cuda` (every method, attack, loss, bound and the zoo on CUDA vs the CPU;
#    measured differences in cuda_report.csv) and, at the same time, every quick-profile
#    notebook with `device: auto` (`robattr build --profile benchmarks/gpu_quick.yml
#    --no-html --force`: the quick profile, device auto);
# 2. then, alone on the GPU, the benchmarks: attributions (robattr vs Captum, chunk
#    rows, the fp32/TF32 precision check), RelEx (precision and memory format, masks'
#    agreement with fp32) and training cost (per loss, relative to CE and to AT).
# Each step writes its log to OUT_DIR; a failing step does not stop the others; the
# exit status is the number of failed steps. Budgets (seconds) bound every step so that
# the whole script ends within about 25 minutes; each step can also be run on its own.
set -u
OUT_DIR=${1:-${OUT:-gpu-check}}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 ROBATTR_CACHE=${ROBATTR_CACHE:-/tmp/robattr-gpu-cache}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
failed=0
step() {  # step NAME BUDGET CMD...: run CMD with a time budget, log to OUT_DIR/NAME.log
    local name=$1 budget=$2; shift 2
    local t0=$SECONDS
    timeout "$budget" "$@" >"$OUT_DIR/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - t0)) s" | tee -a "$OUT_DIR/summary.txt"
    [ $rc -eq 0 ] || failed=$((failed + 1))
    return $rc
}

$PY - <<'EOF' | tee "$OUT_DIR/summary.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NO GPU")
EOF

# 1. correctness: the cuda tests and the 25 notebooks, side by side
step notebooks 900 $PY -m robattr.book.cli build --profile benchmarks/gpu_quick.yml --no-html --force \
    --no-progress --jobs 4 &
nb=$!
ROBATTR_CUDA_REPORT="$OUT_DIR/cuda_report.csv" \
    step pytest_cuda 300 $PY -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda.py
wait $nb || failed=$((failed + 1))
$PY - "$OUT_DIR" <<'EOF'
import json, sys
from pathlib import Path
stamps = json.loads(Path("book/.robattr-stamps.json").read_text()) if Path(
    "book/.robattr-stamps.json").exists() else {}
keys = sorted(str(p.relative_to("notebooks").with_suffix("")) for p in Path("notebooks").rglob("*.ipynb"))
ok = [k for k in keys if k in stamps]
with open(Path(sys.argv[1]) / "summary.txt", "a") as f:
    print(f"notebooks executed on device auto: {len(ok)} of {len(keys)}", file=f)
    for k in keys:
        if k not in stamps:
            print(f"  not done: {k}", file=f)
EOF
tail -n 30 "$OUT_DIR/notebooks.log" > "$OUT_DIR/notebooks_tail.log"

# 2. benchmarks, one at a time
step bench_attributions 240 $PY benchmarks/attributions.py --devices cuda --tv224 --threads 0
step bench_relex 300 $PY benchmarks/relex.py --device cuda --resnet
step bench_training 240 $PY benchmarks/training.py --device cuda --archs lenet resnet20 resnet18_cifar
cat "$OUT_DIR/summary.txt"
exit $failed
