"""pjrtx: run JAX on Apple's MLX through a PJRT plugin.

Installing the package registers the plugin with JAX (entry point group
``jax_plugins``); ``jax.devices()`` then lists the ``pjrtx`` device.
"""
from __future__ import annotations

import os

__version__ = "0.1.0"
PLATFORM = "pjrtx"

# MLX computes float32 matmuls on a GPU in reduced precision (TF32: cuBLAS
# tensor cores on CUDA, and cuDNN's convolutions there too; the neural
# accelerators of Apple M5 and later on Metal) unless MLX_ENABLE_TF32=0,
# which it reads once, at its first such op. StableHLO's dots carry a
# precision config, and precision=HIGHEST (or jax_default_matmul_precision=
# "highest") asks for full float32, but MLX has no per-op switch: pjrtx
# computes every float32 dot and convolution in full precision, as XLA:CPU
# does, unless the user chose. (Set here, before the extension loads libmlx;
# it also applies to native mlx.core code in the same process.)
MLX_TF32_VAR = "MLX_ENABLE_TF32"
os.environ.setdefault(MLX_TF32_VAR, "0")

# A jax outside the tested range: a warning that names the versions, here
# and in `python -m pjrtx doctor` (pjrtx/versions.py); never an exception.
from pjrtx import versions as _versions  # noqa: E402

try:
    _versions.check()
except Exception:  # no jax installed: doctor says so; JAX never loads the plugin
    pass

# Before anything loads the extension (and with it libmlx): on Linux, point
# libmlx's BLAS/LAPACK calls at OpenBLAS (PJRTX_BLAS; see pjrtx/_blas.py).
from pjrtx import _blas  # noqa: E402

_blas.preload()

# jax.distributed.initialize: clear errors where jaxlib would end the
# process (an address nobody serves, a coordinator port in use).
from pjrtx import coordinator as _coordinator  # noqa: E402

_coordinator.install()
