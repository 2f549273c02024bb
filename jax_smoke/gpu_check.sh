#!/usr/bin/env bash
# pjrtx on a GPU device (MLX's CUDA back end on Linux, Metal on macOS): the
# checks the CPU runs cannot make, in one script with a time limit per phase,
# so a short lease on a GPU machine yields every table even if a phase hangs.
#
#   jax_smoke/gpu_check.sh OUT [PHASE ...]
#
# PHASE: doctor smoke tests conformance bench battery (default: all but
# battery, in that order). battery: tests/test_multidevice.py's differential
# battery on several pjrtx devices of the GPU, once per count in
# BATTERY_DEVICES (default "8 2"; with fewer than 8, the programs whose meshes
# do not fit skip).
# Each phase writes OUT/PHASE.txt (its output) and appends a line to
# OUT/summary.txt (rc and seconds); OUT/conformance/report.md holds the
# per-file table. Environment:
#   PYTHON      the interpreter that has pjrtx, jax 0.10.2 and MLX (python3)
#   JAX_TESTS   tests/ of jax-ml/jax at jax-v0.10.2 (conformance only)
#   JOBS        test processes at once (the CPU count)
#   CONF_FILES  upstream files to run (default: the "Core" block of
#               third_party/jax_upstream/selection.txt)
#   T_TESTS, T_CONF, T_BENCH, T_BATTERY   per-phase limits in seconds
#               (240, 330, 200, 240)
#
# PJRTX_DEVICE is gpu unless set: then a machine without a GPU device fails
# the doctor phase instead of silently measuring the CPU. PJRTX_DEVICE=cpu
# runs the same checks on MLX's CPU device, the baseline to compare with.
set -u
cd "$(dirname "$0")/.."
OUT=${1:?usage: jax_smoke/gpu_check.sh OUT [PHASE ...]}
shift
PHASES=${*:-doctor smoke tests conformance bench}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
export PJRTX_DEVICE=${PJRTX_DEVICE:-gpu} PYTHONUNBUFFERED=1
mkdir -p "$OUT"

phase() {  # phase NAME LIMIT_S CMD...
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*"
  timeout -k 10 "$limit" "$@" >"$OUT/$name.txt" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$OUT/summary.txt"
  tail -n 15 "$OUT/$name.txt"
  return $rc
}

core_files() {
  sed -n '/^# Core/,/^$/p' third_party/jax_upstream/selection.txt | awk '/^include /{print $2}'
}

for p in $PHASES; do
  case $p in
    doctor)
      phase doctor 120 "$PYTHON" -m pjrtx doctor || exit 1
      if [ "$PJRTX_DEVICE" = gpu ] && grep -q '^device *unavailable' "$OUT/doctor.txt"; then
        echo "doctor: no GPU device for pjrtx; stopping" | tee -a "$OUT/summary.txt"
        exit 1
      fi ;;
    smoke)
      phase smoke 180 "$PYTHON" jax_smoke/smoke.py ;;
    tests)
      phase tests "${T_TESTS:-240}" "$PYTHON" -m pytest -q -n "$JOBS" tests -p no:cacheprovider ;;
    conformance)
      : "${JAX_TESTS:?JAX_TESTS must name the upstream tests/ folder}"
      # shellcheck disable=SC2046
      phase conformance "${T_CONF:-330}" "$PYTHON" -m pjrtx conformance --jax-tests "$JAX_TESTS" \
        -j "$JOBS" --split-above 40 --timeout 120 --out "$OUT/conformance" \
        ${CONF_FILES:-$(core_files)} ;;
    battery)
      for n in ${BATTERY_DEVICES:-8 2}; do
        PJRTX_BATTERY_DEVICES=$n phase "battery-$n" "${T_BATTERY:-240}" \
          "$PYTHON" -m pytest -q -rs tests/test_multidevice.py -p no:cacheprovider
      done ;;
    bench)
      phase bench "${T_BENCH:-200}" "$PYTHON" jax_smoke/bench.py --repeats 5 ;;
    *)
      echo "unknown phase $p" >&2
      exit 2 ;;
  esac
done
