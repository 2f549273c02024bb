// Helpers shared by host_small.cc and host_float.cc (not a public API):
// reading and building the small computed arrays host forms work on. It
// sits below host_small.h and host_float.h and includes neither.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/mlx/host/host_int.h"
#include "backend/mlx/region_program.h"

namespace pjrtx::backend {

namespace host_detail {
// Whether `a` can be read here: computed, not a trace placeholder, row
// contiguous with no offset games, and small.
bool readable(const mx::array& a);
// A computed array of type `t` holding `v` (values already wrapped to t).
mx::array make_int_array(const std::vector<Int128>& v, const compiler::TensorType& t);
std::vector<int64_t> strides_of(const compiler::Shape& s);
// Every operand readable and of its planned type.
bool all_readable(const Arrays& in, const std::vector<compiler::TensorType>& types);
std::vector<compiler::TensorType> operand_types(const compiler::Plan& plan,
                                                const compiler::Instruction& inst);
// The result element each element of an operand of shape `in` folds into
// when `axes` are reduced (empty when an axis is out of range or repeated),
// and how many elements fold into each.
std::vector<size_t> reduce_targets(const compiler::TensorType& in, const std::vector<int64_t>& axes,
                                   int64_t& count);
}  // namespace host_detail

}  // namespace pjrtx::backend
