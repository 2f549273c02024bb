// Plan element types <-> MLX dtypes.
#pragma once

#include <mlx/array.h>
#include <mlx/dtype.h>

#include "compiler/types.h"

namespace pjrtx::backend {

namespace mx = mlx::core;

// Throws UNIMPLEMENTED naming the type when MLX cannot represent it
// (token, ...). c128 gives float64: MLX has no complex128, and a c128[S]
// value is stored as f64[S, 2], (re, im) pairs (see storage_shape and
// complex128.h).
mx::Dtype to_mlx(compiler::DType t);
compiler::DType from_mlx(mx::Dtype t);
// The plan type whose MLX dtype stores t: s4 -> s8, u4 -> u8, small floats
// (f8*, f4e2m1fn) -> u8, c128 -> f64, else t itself.
compiler::DType storage_dtype(compiler::DType t);
// The canonical byte of a 4-bit type from any byte whose low 4 bits hold the
// value: s4 sign-extends them (0x0c -> -4, 0x13 -> 3), u4 clears the high
// nibble (0xf3 -> 3). Other types pass through. Integer ops compute on the
// 8-bit storage, and 8-bit results wrapped mod 2^8 are right mod 2^4, so this
// one step makes them XLA's 4-bit answers.
mx::array canonical_subbyte(const mx::array& x, compiler::DType t);
mx::Shape to_mlx_shape(const compiler::Shape& s);
// The shape of the MLX array that stores a value of type t: its shape, and
// a trailing 2 for c128 (re, im): the bytes of std::complex<double>.
mx::Shape storage_shape(const compiler::TensorType& t);

}  // namespace pjrtx::backend
