#!/usr/bin/env bash
# On a GPU machine without network access: reassemble what gpu_stage.sh
# packed, unpack it into /tmp/pjrtx-gpu/site and build pjrtx against MLX's
# CUDA library there (build/gpu, linked into pjrtx/ as the dev build is).
#
#   jax_smoke/gpu_setup.sh add PART      keep one part in /tmp/pjrtx-gpu
#   jax_smoke/gpu_setup.sh build PART    add the last part, unpack, build
#
# Writes /tmp/pjrtx-gpu/env.sh: source it to put the staged jax 0.10.2 and
# mlx ahead of whatever the machine has installed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=/tmp/pjrtx-gpu
mkdir -p "$ROOT/parts"
cmd=${1:?usage: gpu_setup.sh add|build PART}
cp "${2:?a part}" "$ROOT/parts/"
[ "$cmd" = add ] && { ls -l "$ROOT/parts"; exit 0; }
[ "$cmd" = build ] || { echo "unknown command $cmd" >&2; exit 2; }

PY=${PYTHON:-python3}
BUILD=${BUILD:-build/gpu}
# The system compiler, whose libstdc++ is the one Python loads: that image's
# default CXX (/opt/gcc, GCC 15) instantiates iostream templates that libmlx
# then bound to in our module, and crashed. CXX overrides.
export CXX=${CXX_OVERRIDE:-/usr/bin/g++}
rm -rf "$ROOT/site" && mkdir -p "$ROOT/site"
cat "$ROOT"/parts/pjrtx-gpu-site.tar.xz.part-* | xz -d -T0 | tar -C "$ROOT/site" -xf -
cat >"$ROOT/env.sh" <<EOF
export PYTHONPATH=$PWD:$ROOT/site\${PYTHONPATH:+:\$PYTHONPATH}
EOF
. "$ROOT/env.sh"
"$PY" -c 'import jax, jaxlib, mlx.core as mx; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "mlx", mx.__version__, mx.default_device())'

# MLX's CMake package checks for the CUDA toolkit and cuDNN although its
# target links neither: point it at the cuDNN of the installed wheels.
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cudnn_h=$(find "$site/nvidia" -name cudnn.h -print -quit 2>/dev/null || true)
cudnn_so=$(find "$site/nvidia" -name 'libcudnn.so*' -print -quit 2>/dev/null || true)
echo "cudnn: ${cudnn_h:-none} ${cudnn_so:-none}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v "$PY")" \
  ${cudnn_h:+-DCUDNN_INCLUDE_PATH="$(dirname "$cudnn_h")"} \
  ${cudnn_so:+-DCUDNN_LIBRARY_PATH="$(dirname "$cudnn_so")"} >"$ROOT/cmake.log" 2>&1 \
  || { tail -30 "$ROOT/cmake.log"; exit 1; }
ninja -k 0 -C "$BUILD" >"$ROOT/ninja.log" 2>&1 || { tail -40 "$ROOT/ninja.log"; exit 1; }
for f in "$BUILD"/_pjrtx*.so "$BUILD"/libpjrtx_blas.so; do
  [ -e "$f" ] && ln -sf "../$f" "pjrtx/$(basename "$f")"
done
"$PY" -m pjrtx doctor
