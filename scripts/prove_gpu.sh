#!/usr/bin/env bash
# On a GPU node: proves the NCCL path and the GPU-only labs there, then times their grading.
#   scripts/prove_gpu.sh                    with .venv/bin/python (`scripts/setup.sh test` installs what it needs)
#   PYTHON=python3 scripts/prove_gpu.sh     with another interpreter that holds the project's packages and torch
# Steps, each reported with its exit status (the script exits non-zero if any failed):
#   1. what the node has: the GPU, the driver, torch and its CUDA
#   2. the GPU tests (SQLite only): NCCL in the sandbox, GPU and CPU memory caps, a GPU worker process
#      taking a GPU-only job from the queue, and the two GPU-only labs' real grading
#   3. `ringlab lab test` on the GPU-only labs: the reference in full, every mutant caught
#   4. bench/labs.py on the GPU-only labs: click-to-verdict through the HTTP API and the worker
set -uo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
gpu_labs=gpu-mixed-precision,gpu-memory-profile
failed=()
step() {
  local name=$1; shift
  printf '\n\033[1m==> %s\033[0m\n' "$name"
  local start=$SECONDS
  "$@"; local rc=$?
  printf '<== %s: exit %s in %s s\n' "$name" "$rc" $((SECONDS - start))
  [ "$rc" = 0 ] || failed+=("$name")
}
info() {
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
"nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-", "GPUs", torch.cuda.device_count())'
  "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' || { echo "no CUDA GPU here"; return 3; }
}
step "the node" info || true
[ ${#failed[@]} = 0 ] || { echo "no GPU: nothing to prove here" >&2; exit 3; }
step "GPU tests" env RINGLAB_TEST_BACKENDS=sqlite "$py" -m pytest -p no:cacheprovider -rs -q \
  tests/labs/test_gpu.py tests/labs_app/test_worker_process.py \
  tests/labs/test_gpu_mixed_precision.py tests/labs/test_gpu_memory_profile.py
step "lab test" "$py" -m app lab test --no-record ${gpu_labs//,/ }
step "grading bench" "$py" bench/labs.py -n 10 --cold 0 --labs "$gpu_labs"
if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}" >&2; exit 1; fi
echo "the GPU path is proven on this node"
