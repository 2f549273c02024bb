// complex128 on MLX, which has no complex<f64> dtype (mlx 0.32 has
// complex64 only). pjrtx stores a c128[S] value as an f64[S, 2] array of
// (re, im) pairs: the bytes of std::complex<double>, so host transfers copy
// them as they are and host kernels (linalg, FFT) read them as
// std::complex<double>. Every instruction that touches c128 is lowered by
// lower_complex128 (complex128.cc), in f64; f64 work runs on the CPU stream
// under a GPU device, as plain f64 does.
#pragma once

#include "backend/mlx/registry.h"

namespace pjrtx::backend {

// The real (k = 0) or imaginary (k = 1) parts of stored c128 pairs: a view
// (a slice of the trailing dim), also of arrays with no elements.
mx::array c128_part(const mx::array& pairs, int k);

// The kernel of an instruction with a c128 operand or result; `own` is the
// op's ordinary lowering (used on the parts, or as it is where the op only
// carries values). Ops with no complex128 form fail naming the op.
Kernel lower_complex128(LowerCtx& ctx, Lowering own);

}  // namespace pjrtx::backend
