#!/usr/bin/env bash
# Stage what a GPU machine without network access needs to build and run
# pjrtx on MLX's CUDA back end: jax/jaxlib 0.10.2, mlx 0.32.4 with its CUDA 13
# library, and pypjrt, as Python 3.12 wheels, unpacked into one tree, the two
# large libraries stripped of their local symbols (the dynamic symbols stay),
# packed with xz and split into parts that each fit one device call (64 MiB
# per call, the working tree included): about 123 MB, two parts.
#
#   jax_smoke/gpu_stage.sh [DIR]     (DIR: .whl, ignored by git)
#
# Then, on the device machine, one call per part (the machine keeps /tmp while
# it stays warm between calls):
#   jax_smoke/gpu_setup.sh add DIR/PART            (every part but the last)
#   jax_smoke/gpu_setup.sh build DIR/LASTPART      (unpack, build pjrtx)
# after which `. /tmp/pjrtx-gpu/env.sh` sets PYTHONPATH for jax_smoke/gpu_check.sh.
#
# The cuDNN, cuBLAS, NCCL and CUDA runtime wheels MLX's CUDA build needs are
# the ones PyTorch (cu13) already has on that machine; pip here only fetches.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
# 62,000,000 bytes: a part and the working tree (about 2 MB) stay under 64 MiB
PART_BYTES=${PART_BYTES:-62000000}
PY=${PYTHON:-python3}
mkdir -p "$DIR"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$work/w" \
  jax==0.10.2 jaxlib==0.10.2 mlx==0.32.4 mlx-cuda-13==0.32.4 pypjrt==0.1.1
mkdir -p "$work/site"
for w in "$work"/w/*.whl; do (cd "$work/site" && unzip -q -o "$w"); done
for lib in mlx/lib/libmlx.so jaxlib/libjax_common.so; do
  strip --strip-unneeded "$work/site/$lib"
done
rm -f "$DIR"/pjrtx-gpu-site.tar.xz.part-*
tar -C "$work/site" -cf - . | xz -T0 -9 | split -b "$PART_BYTES" - "$DIR/pjrtx-gpu-site.tar.xz.part-"
ls -l "$DIR"/pjrtx-gpu-site.tar.xz.part-*
