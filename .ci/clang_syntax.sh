#!/usr/bin/env bash
# Every csrc/**/*.cc through clang++-19 -fsyntax-only against libc++, with the
# include flags CMakeLists.txt gives the build (csrc, MLX's headers from the
# mlx wheel, nanobind's, Python's). macOS builds with Apple clang and libc++,
# which include less transitively than libstdc++: a missing #include <...>
# that GCC on Linux forgives breaks the Mac build. This catches it on Linux.
#
#   .ci/clang_syntax.sh [PYTHON]     PYTHON: an interpreter with mlx and
#                                    nanobind installed (default: python3)
#   .ci/clang_syntax.sh --install    only install the compiler (CI starts
#                                    this beside the pip install)
# Installs clang and libc++ with apt-get when they are missing and it runs as
# root (CI); exits 1 listing the files with errors.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-python3}"

# clang 19 and its libc++ (CLANG_VERSION to change): what Apple clang 17
# (Xcode 16.3+) is built on. clang 14 rejects C++20 that Apple clang 15+
# accepts (lambdas capturing structured bindings), so it reports false
# errors; Debian installs one libc++-N-dev at a time.
# _LIBCPP_REMOVE_TRANSITIVE_INCLUDES drops the includes libc++ keeps only for
# old code, as its newer releases do: a missing include fails here first.
V="${CLANG_VERSION:-19}"
CXX="clang++-$V"
have_libcxx() {
  command -v "$CXX" >/dev/null &&
    echo '#include <vector>' | "$CXX" -std=c++20 -stdlib=libc++ -fsyntax-only -x c++ - 2>/dev/null
}
if ! have_libcxx; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "clang_syntax: installing clang-$V and libc++ (apt-get)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "clang-$V" "libc++-$V-dev" "libc++abi-$V-dev" >/dev/null
  fi
  have_libcxx || { echo "clang_syntax: needs $CXX and libc++ (apt-get install clang-$V libc++-$V-dev libc++abi-$V-dev)" >&2; exit 2; }
fi
[ "$PY" = --install ] && exit 0

# The same places CMakeLists.txt finds: `python -m mlx --cmake-dir` is the
# mlx package folder, whose include/ holds the headers.
MLX_INC="$("$PY" -m mlx --cmake-dir)/include"
NB_INC="$("$PY" -m nanobind --include_dir)"
PY_INC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
# The compile definitions CMakeLists.txt gives; -isystem for MLX as CMake
# does (imported target), so warnings in its
# headers do not count; -Wno-unknown-warning-option: the build's -W flags
# are GCC's.
LOG="$(mktemp -d)"
trap 'rm -rf "$LOG"' EXIT
# The header CMakeLists.txt generates (configure_file): linalg_kernels.h's
# text inside loops/linalg_text.h.in, for the host loop engine.
GEN="$LOG/generated"
mkdir -p "$GEN/backend/mlx/loops"
"$PY" -c 'import sys; t = open(sys.argv[1]).read(); k = open(sys.argv[2]).read()
open(sys.argv[3], "w").write(t.replace("@PJRTX_LINALG_KERNELS_TEXT@", k))' \
  csrc/backend/mlx/loops/linalg_text.h.in csrc/backend/mlx/host/linalg_kernels.h \
  "$GEN/backend/mlx/loops/linalg_text.h"
FLAGS=(-std=c++20 -stdlib=libc++ -fsyntax-only -fPIC -DPJRTX_VERSION='"dev"'
       -DPJRTX_MLX_BUILD_VERSION='"dev"'
       -Icsrc -I"$GEN" -isystem "$MLX_INC" -isystem "$NB_INC" -isystem "$PY_INC"
       -D_LIBCPP_REMOVE_TRANSITIVE_INCLUDES -Wno-unknown-warning-option)

mapfile -t FILES < <(find csrc -name '*.cc' | sort)
JOBS="$(nproc 2>/dev/null || echo 2)"
printf '%s\n' "${FILES[@]}" |
  xargs -P "$JOBS" -I{} sh -c '"$@" {} > "$0/$(echo {} | tr / _).log" 2>&1 || echo {} >> "$0/failed"' \
    "$LOG" "$CXX" "${FLAGS[@]}"
if [ -s "$LOG/failed" ]; then
  for f in $(sort "$LOG/failed"); do
    echo "== $f"
    grep -E 'error:' "$LOG/$(echo "$f" | tr / _).log" | head -5
  done
  echo "clang_syntax: $(wc -l < "$LOG/failed") of ${#FILES[@]} files fail $CXX -stdlib=libc++ -fsyntax-only"
  exit 1
fi
echo "clang_syntax: ${#FILES[@]} files pass $CXX -stdlib=libc++ -fsyntax-only"
