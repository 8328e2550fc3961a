#!/usr/bin/env bash
# One GPU session's measurements, started in the background on a lent GPU
# machine whose commands may last 10 minutes each (the device tool):
#
#   bash bench/gpu_session.sh start     # snapshot the tree, start the job (setsid), return at once
#   bash bench/gpu_session.sh wait N    # wait up to N s for the job, print its progress
#   bash bench/gpu_session.sh collect D # copy logs, JSON and every model's report.json into D
#
# The job runs from a snapshot of the working tree (later calls re-copy the
# tree under the repo root; the running job must not see files change), in
# this order: the timing-hack check (bench/gpu_checks/check_hacks.py, beside
# the first searches: its verdicts do not depend on a quiet GPU), then
# `bench/gpu_models.py` for each dtype in $DTYPES (searches in $LANES lanes on
# the one GPU, every timing holding it alone; then each model timed alone).
# The reference models (../shared/models) do not travel with the working tree:
# copy them into .device_carry/models (git-ignored) and name .device_carry in
# the device call's carry; the job then finds them there (LEGO_MODELS_DIR).
# Settings: LANES (default 0,0,0,0,0,0), DTYPES ("bf16 fp32"), MODELS (all),
# MAX_SEARCH_S (45), REP (50), SEARCH_BUDGET_S (450 per dtype).
#
# JOB=breadth runs instead the GPU-marked tests (TRITON_INTERPRET=0; first,
# alone: some of them time kernels) and then `bench/breadth_models.py` over every dtype in
# $DTYPES at once, $JOBS (default 10) optimizer runs at a time, each capped
# at $MAX_SEARCH_S of tree search and $MODEL_TIMEOUT_S (600) in all.
#
# JOB=accept is the search issue's acceptance run (issue 26) with the judge's
# GPU checks (issue 27) first: the GPU-marked tests ($GPU_TESTS and the dot
# precision tests; alone, $TEST_TIMEOUT_S, default 300), then
# `bench/gpu_models.py --sets $SETS --dtypes $DTYPES --jobs $JOBS
# --no-bench-timing --sidebyside` at default search settings (defaults:
# reference,bench,breadth; bf16; 4; at most $MODEL_TIMEOUT_S (400) per
# search), within $SEARCH_BUDGET_S of searches and $BUDGET_S in all when set
# (models not reached become error rows that say so).  sidebyside.py travels
# in .device_carry/tools (LEGO_SIDEBYSIDE).
#
# JOB=real runs instead `bench/real_models.py` (the Hugging Face, torchvision
# and timm models of bench/models/real) over every dtype in $DTYPES, $JOBS
# (default 4) optimizer runs at a time, each capped at $MAX_SEARCH_S (60) of
# tree search and $MODEL_TIMEOUT_S (1200) in all; then one timing process
# per dtype.  Beside its searches, the GPU-marked real-library tests
# (tests/integration/test_real_models.py: torchvision and timm models) in
# $TEST_WORKERS (2) pytest workers.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GPU_TESTS="tests/hacks/test_hacks.py tests/unit/test_gemm_epilogue.py tests/unit/test_judge_boundary.py tests/unit/test_launch.py tests/unit/test_launch_nhwc.py tests/unit/test_timing.py tests/unit/test_capture_errors.py"
WORK=${GPU_SESSION_DIR:-/root/lego-gpu-session}
LOG=$WORK/log
case "${1:-}" in
start)
  rm -rf "$WORK"; mkdir -p "$LOG"
  cp -a "$ROOT" "$WORK/tree"
  if [ -z "${LEGO_MODELS_DIR:-}" ] && [ -d "$WORK/tree/.device_carry/models" ]; then
    export LEGO_MODELS_DIR="$WORK/tree/.device_carry/models"
  fi
  if [ -z "${LEGO_SIDEBYSIDE:-}" ] && [ -f "$WORK/tree/.device_carry/tools/sidebyside.py" ]; then
    export LEGO_SIDEBYSIDE="$WORK/tree/.device_carry/tools/sidebyside.py"
  fi
  cat >"$WORK/job.sh" <<EOF
set -u
cd "$WORK/tree"
${LEGO_MODELS_DIR:+export LEGO_MODELS_DIR=$LEGO_MODELS_DIR}
${LEGO_SIDEBYSIDE:+export LEGO_SIDEBYSIDE=$LEGO_SIDEBYSIDE}
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv >"$LOG/gpu.txt" 2>&1
if [ "${JOB:-models}" = breadth ]; then
  timeout 420 python3 -m pytest -o addopts= -p no:cacheprovider -q -rs -m gpu $GPU_TESTS >"$LOG/gpu-tests.txt" 2>&1; echo "rc \$?" >>"$LOG/gpu-tests.txt"
  start=\$(date +%s)
  python3 bench/breadth_models.py --device cuda --dtypes $(echo ${DTYPES:-fp32 bf16} | tr ' ' ,) --jobs ${JOBS:-10} \
    ${MODELS:+--models $MODELS} --timeout ${MODEL_TIMEOUT_S:-600} --search-arg=--max-search-time=${MAX_SEARCH_S:-45} \
    --out-dir "$WORK/out" --results-dir "$WORK/results" >"$LOG/bench-breadth.txt" 2>&1
  echo "rc \$? wall \$(( \$(date +%s) - start )) s" >>"$LOG/bench-breadth.txt"
  wait; echo done >"$LOG/DONE"; exit 0
fi
if [ "${JOB:-models}" = accept ]; then
  timeout ${TEST_TIMEOUT_S:-300} python3 -m pytest -o addopts= -p no:cacheprovider -q -rs -m gpu $GPU_TESTS tests/unit/test_judge_dot_precision.py \
    >"$LOG/gpu-tests.txt" 2>&1; echo "rc \$?" >>"$LOG/gpu-tests.txt"
  start=\$(date +%s)
  python3 bench/gpu_models.py --sets ${SETS:-reference,bench,breadth} --dtypes ${DTYPES:-bf16} --jobs ${JOBS:-4} \
    --no-bench-timing --sidebyside --sidebyside-runs ${SBS_RUNS:-1} --timing-cpu 3 --timeout ${MODEL_TIMEOUT_S:-400} \
    ${SEARCH_BUDGET_S:+--search-budget $SEARCH_BUDGET_S} ${BUDGET_S:+--budget $BUDGET_S} ${MODELS:+--models $MODELS} \
    --out-dir "$WORK/out" --results-dir "$WORK/results" >"$LOG/bench-accept.txt" 2>&1
  echo "rc \$? wall \$(( \$(date +%s) - start )) s" >>"$LOG/bench-accept.txt"
  echo done >"$LOG/DONE"; exit 0
fi
if [ "${JOB:-models}" = real ]; then
  export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
  # the real-library tests that need the GPU (torchvision, timm), beside the searches; done before the timing phase
  (timeout 900 python3 -m pytest -o addopts= -p no:cacheprovider -q -rs -m gpu -n ${TEST_WORKERS:-2} tests/integration/test_real_models.py \
    >"$LOG/gpu-tests.txt" 2>&1; echo "rc \$?" >>"$LOG/gpu-tests.txt") &
  start=\$(date +%s)
  python3 bench/real_models.py --device cuda --dtypes $(echo ${DTYPES:-bf16 fp32} | tr ' ' ,) --jobs ${JOBS:-4} \
    ${MODELS:+--models $MODELS} --timeout ${MODEL_TIMEOUT_S:-1200} --max-search-time ${MAX_SEARCH_S:-60} \
    --out-dir "$WORK/out" --results-dir "$WORK/results" >"$LOG/bench-real.txt" 2>&1
  echo "rc \$? wall \$(( \$(date +%s) - start )) s" >>"$LOG/bench-real.txt"
  wait; echo done >"$LOG/DONE"; exit 0
fi
(python3 bench/gpu_checks/check_hacks.py >"$LOG/hacks.txt" 2>&1; echo "rc \$?" >>"$LOG/hacks.txt") &
for dtype in ${DTYPES:-bf16 fp32}; do
  start=\$(date +%s)
  python3 bench/gpu_models.py --gpus ${LANES:-0,0,0,0,0,0} --dtypes \$dtype --rep ${REP:-50} \
    ${MODELS:+--models $MODELS} --timeout 300 --search-budget ${SEARCH_BUDGET_S:-450} \
    --search-arg=--max-search-time=${MAX_SEARCH_S:-45} --out-dir "$WORK/out" --results-dir "$WORK/results" \
    >"$LOG/bench-\$dtype.txt" 2>&1
  echo "rc \$? wall \$(( \$(date +%s) - start )) s" >>"$LOG/bench-\$dtype.txt"
done
wait
echo done >"$LOG/DONE"
EOF
  setsid nohup bash "$WORK/job.sh" >"$LOG/job.txt" 2>&1 </dev/null &
  echo "started: $WORK/job.sh"
  ;;
wait)
  limit=${2:-500}; t0=$(date +%s)
  while [ ! -e "$LOG/DONE" ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do sleep 10; done
  [ -e "$LOG/gpu-tests.txt" ] && { echo "== gpu tests"; tail -5 "$LOG/gpu-tests.txt"; }
  for f in "$LOG"/bench-*.txt; do [ -e "$f" ] && { echo "== $f"; grep -E '^\[|rc |geomean|written|as expected' "$f" | tail -40; }; done
  [ -e "$LOG/DONE" ] && echo "JOB DONE" || echo "JOB RUNNING"
  ;;
collect)
  dest=${2:?destination folder}; mkdir -p "$dest"
  cp "$WORK"/results/*.json "$dest"/ 2>/dev/null  # at most 8 files come back: logs and reports as two archives
  tar czf "$dest/logs.tar.gz" -C "$LOG" .
  (cd "$WORK/out" 2>/dev/null && tar czf "$dest/reports.tar.gz" $(ls -d */report.json */FAILED.json 2>/dev/null))
  ls -la "$dest"
  ;;
*)
  echo "usage: $0 start | wait SECONDS | collect FOLDER" >&2; exit 2
  ;;
esac
