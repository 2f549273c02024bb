#include "backend/mlx/host/host_small.h"

#include <mlx/ops.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_float.h"
#include "backend/mlx/host/host_int.h"
#include "backend/mlx/host/host_small_detail.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::TensorType;
using compiler::ValueId;

namespace host_detail {

// Whether `a` can be read here: computed, not a trace placeholder, row
// contiguous with no offset games, and small.
bool readable(const mx::array& a) {
  return a.size() <= static_cast<size_t>(kHostSmallMaxElements) && !a.is_tracer() &&
         a.is_available() && a.flags().row_contiguous && a.data_size() == a.size();
}

// Element i of an integer or bool array, widened exactly.
Int128 read_int_elem(const mx::array& a, size_t i) {
  switch (a.dtype()) {
    case mx::bool_: return a.data<bool>()[i] ? 1 : 0;
    case mx::int8: return a.data<int8_t>()[i];
    case mx::int16: return a.data<int16_t>()[i];
    case mx::int32: return a.data<int32_t>()[i];
    case mx::int64: return a.data<int64_t>()[i];
    case mx::uint8: return a.data<uint8_t>()[i];
    case mx::uint16: return a.data<uint16_t>()[i];
    case mx::uint32: return a.data<uint32_t>()[i];
    case mx::uint64: return a.data<uint64_t>()[i];
    default: return 0;  // not reached: int_type operands only
  }
}

template <typename T>
mx::array from_ints(const std::vector<Int128>& v, const mx::Shape& shape, mx::Dtype dt) {
  std::vector<T> data(v.size());
  for (size_t i = 0; i < v.size(); ++i) data[i] = static_cast<T>(v[i]);
  return mx::array(data.begin(), shape, dt);
}

// A computed array of type `t` holding `v` (values already wrapped to t).
mx::array make_int_array(const std::vector<Int128>& v, const TensorType& t) {
  mx::Shape shape = to_mlx_shape(t.shape);
  mx::Dtype dt = to_mlx(t.dtype);
  switch (dt) {
    case mx::bool_: return from_ints<bool>(v, shape, dt);
    case mx::int8: return from_ints<int8_t>(v, shape, dt);
    case mx::int16: return from_ints<int16_t>(v, shape, dt);
    case mx::int32: return from_ints<int32_t>(v, shape, dt);
    case mx::int64: return from_ints<int64_t>(v, shape, dt);
    case mx::uint8: return from_ints<uint8_t>(v, shape, dt);
    case mx::uint16: return from_ints<uint16_t>(v, shape, dt);
    case mx::uint32: return from_ints<uint32_t>(v, shape, dt);
    default: return from_ints<uint64_t>(v, shape, dt);
  }
}

// Data movement of any of these types copies elements as they are stored.
bool movable(DType t) {
  switch (t) {
    case DType::kPred: case DType::kS8: case DType::kS16: case DType::kS32: case DType::kS64:
    case DType::kU8: case DType::kU16: case DType::kU32: case DType::kU64: case DType::kF16:
    case DType::kBF16: case DType::kF32: case DType::kF64: case DType::kC64:
      return true;
    default:
      return false;
  }
}

// Calls f(T{}) with the C++ type MLX stores `dt` as.
template <typename F>
auto with_storage_type(mx::Dtype dt, F&& f) {
  switch (dt) {
    case mx::bool_: return f(bool{});
    case mx::int8: return f(int8_t{});
    case mx::int16: return f(int16_t{});
    case mx::int32: return f(int32_t{});
    case mx::int64: return f(int64_t{});
    case mx::uint8: return f(uint8_t{});
    case mx::uint16: return f(uint16_t{});
    case mx::uint32: return f(uint32_t{});
    case mx::uint64: return f(uint64_t{});
    case mx::float16: return f(mx::float16_t{});
    case mx::bfloat16: return f(mx::bfloat16_t{});
    case mx::float32: return f(float{});
    case mx::float64: return f(double{});
    default: return f(mx::complex64_t{});
  }
}

// An array of type `t` whose element i is element src[i] of the sources
// laid end to end (all of one dtype): src[i] < a.size() reads `a`, the
// next b.size() read `b`, and so on.
mx::array pick(const std::vector<const mx::array*>& from, const std::vector<size_t>& src,
               const TensorType& t) {
  mx::Shape shape = to_mlx_shape(t.shape);
  const mx::Dtype dt = from.front()->dtype();
  return with_storage_type(dt, [&](auto zero) {
    using T = decltype(zero);
    std::vector<const T*> base;
    std::vector<size_t> end;
    size_t at = 0;
    for (const mx::array* a : from) {
      base.push_back(a->data<T>());
      end.push_back(at += a->size());
    }
    std::vector<T> data(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      size_t k = 0;
      while (src[i] >= end[k]) ++k;
      data[i] = base[k][src[i] - (end[k] - from[k]->size())];
    }
    return mx::array(data.begin(), shape, dt);
  });
}

std::vector<int64_t> strides_of(const compiler::Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

bool dtype_matches(const mx::array& a, const TensorType& t) {
  return a.dtype() == to_mlx(t.dtype) && static_cast<int64_t>(a.size()) == t.num_elements();
}

bool all_readable(const Arrays& in, const std::vector<TensorType>& types) {
  if (in.size() != types.size()) return false;
  for (size_t k = 0; k < in.size(); ++k)
    if (!readable(in[k]) || !dtype_matches(in[k], types[k])) return false;
  return true;
}

std::vector<TensorType> operand_types(const compiler::Plan& plan, const Instruction& inst) {
  std::vector<TensorType> ts;
  for (ValueId v : inst.operands) ts.push_back(plan.type(v));
  return ts;
}

bool small(const TensorType& t) { return t.num_elements() <= kHostSmallMaxElements; }

// The result element each element of an operand of shape `in` folds into
// when `axes` are reduced (empty when an axis is out of range or repeated),
// and how many elements fold into each.
std::vector<size_t> reduce_targets(const TensorType& in, const std::vector<int64_t>& axes,
                                   int64_t& count) {
  std::vector<bool> reduced(static_cast<size_t>(in.rank()), false);
  count = 1;
  for (int64_t a : axes) {
    if (a < 0 || a >= in.rank() || reduced[a]) return {};
    reduced[a] = true;
    count *= in.shape[a];
  }
  const std::vector<int64_t> st = strides_of(in.shape);
  std::vector<size_t> dst(static_cast<size_t>(in.num_elements()));
  for (size_t i = 0; i < dst.size(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (reduced[d]) continue;
      o = o * in.shape[d] + (static_cast<int64_t>(i) / st[d]) % in.shape[d];
    }
    dst[i] = static_cast<size_t>(o);
  }
  return dst;
}

}  // namespace host_detail

namespace {

using namespace host_detail;

HostForm elementwise_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  const int64_t n = out.num_elements();
  if (ins.size() > 3) return {};
  for (const TensorType& t : ins)
    if (t.num_elements() != n && t.num_elements() != 1) return {};
  const compiler::Plan* pl = &plan;
  const Instruction* ip = &inst;
  return [pl, ip, out, ins, n](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    std::vector<Int128> v(static_cast<size_t>(n));
    Int128 x[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < in.size(); ++k)
        x[k] = read_int_elem(in[k], in[k].size() == 1 ? 0 : static_cast<size_t>(i));
      v[static_cast<size_t>(i)] = host_int::apply(*pl, *ip, x);
    }
    res.push_back(make_int_array(v, out));
    return true;
  };
}

// select(pred, on_true, on_false) of any movable type.
HostForm select_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins.size() != 3 || ins[0].dtype != DType::kPred || !movable(out.dtype) ||
      ins[1] != out || ins[2] != out)
    return {};
  if (ins[0].num_elements() != 1 && ins[0].num_elements() != out.num_elements()) return {};
  return [out, ins](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    const size_t n = static_cast<size_t>(out.num_elements());
    const bool* p = in[0].data<bool>();
    std::vector<size_t> src(n);
    for (size_t i = 0; i < n; ++i) src[i] = p[in[0].size() == 1 ? 0 : i] ? i : n + i;
    res.push_back(pick({&in[1], &in[2]}, src, out));
    return true;
  };
}

// Data movement: result element i is operand element src[i].
HostForm gather_kernel(TensorType out, std::vector<TensorType> ins, std::vector<size_t> src) {
  return [out, ins, src](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    res.push_back(pick({&in[0]}, src, out));
    return true;
  };
}

// bitcast_convert between types of one width (u32 <-> f32: a random
// draw's bits becoming a float): the same bytes, read as the new type.
HostForm bitcast_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins.size() != 1 || !movable(out.dtype) || !movable(ins[0].dtype) ||
      out.dtype == DType::kPred || ins[0].dtype == DType::kPred ||
      compiler::dtype_bits(out.dtype) != compiler::dtype_bits(ins[0].dtype) ||
      out.num_elements() != ins[0].num_elements())
    return {};
  return [out, ins](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    const mx::Dtype dt = to_mlx(out.dtype);
    res.push_back(with_storage_type(dt, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_same_v<T, bool>) {
        return in[0];  // not reached: pred is refused above
      } else {
        std::vector<T> data(in[0].size());
        std::memcpy(data.data(), in[0].data<uint8_t>(), data.size() * sizeof(T));
        return mx::array(data.begin(), to_mlx_shape(out.shape), dt);
      }
    }));
    return true;
  };
}

HostForm broadcast_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins.size() != 1 || !movable(out.dtype) || ins[0].dtype != out.dtype) return {};
  const std::vector<int64_t>& dims = inst.attr_ints("broadcast_dimensions");
  if (static_cast<int64_t>(dims.size()) != ins[0].rank()) return {};
  // The operand element each result element reads, fixed per instruction.
  const std::vector<int64_t> ost = strides_of(ins[0].shape), rst = strides_of(out.shape);
  std::vector<size_t> src(static_cast<size_t>(out.num_elements()));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] < 0 || dims[d] >= out.rank()) return {};
      int64_t coord = (static_cast<int64_t>(i) / rst[dims[d]]) % out.shape[dims[d]];
      o += (ins[0].shape[d] == 1 ? 0 : coord) * ost[d];
    }
    src[i] = static_cast<size_t>(o);
  }
  return gather_kernel(out, std::move(ins), std::move(src));
}

HostForm reshape_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins.size() != 1 || !movable(out.dtype) || ins[0].dtype != out.dtype ||
      ins[0].num_elements() != out.num_elements())
    return {};
  std::vector<size_t> src(static_cast<size_t>(out.num_elements()));
  for (size_t i = 0; i < src.size(); ++i) src[i] = i;
  return gather_kernel(out, std::move(ins), std::move(src));
}

// Coordinates of element i of `shape` (row-major strides `st`).
int64_t coord(int64_t i, const std::vector<int64_t>& st, const compiler::Shape& shape, size_t d) {
  return (i / st[d]) % shape[d];
}

HostForm slice_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins.size() != 1 || !movable(out.dtype) || ins[0].dtype != out.dtype) return {};
  const auto& start = inst.attr_ints("start_indices");
  const auto& strides = inst.attr_ints("strides");
  const size_t rank = out.shape.size();
  if (start.size() != rank || strides.size() != rank || ins[0].shape.size() != rank) return {};
  const std::vector<int64_t> ist = strides_of(ins[0].shape), ost = strides_of(out.shape);
  std::vector<size_t> src(static_cast<size_t>(out.num_elements()));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t c = start[d] + coord(static_cast<int64_t>(i), ost, out.shape, d) * strides[d];
      if (c < 0 || c >= ins[0].shape[d]) return {};  // the lowering names the bad slice
      o += c * ist[d];
    }
    src[i] = static_cast<size_t>(o);
  }
  return gather_kernel(out, std::move(ins), std::move(src));
}

// concatenate along `dimension`: element i of the result is element
// src[i].second of operand src[i].first.
HostForm concatenate_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  const int64_t axis = inst.attr_int("dimension", -1);
  if (ins.empty() || !movable(out.dtype) || axis < 0 || axis >= out.rank()) return {};
  std::vector<int64_t> offset;
  int64_t at = 0;
  for (const TensorType& t : ins) {
    if (t.dtype != out.dtype || t.rank() != out.rank()) return {};
    offset.push_back(at);
    at += t.shape[axis];
  }
  if (at != out.shape[axis]) return {};
  const std::vector<int64_t> ost = strides_of(out.shape);
  std::vector<size_t> src(static_cast<size_t>(out.num_elements()));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t c = coord(static_cast<int64_t>(i), ost, out.shape, static_cast<size_t>(axis));
    size_t k = 0;
    int64_t first = 0;  // operand k's first element in the sources laid end to end
    while (k + 1 < ins.size() && c >= offset[k + 1]) first += ins[k++].num_elements();
    const std::vector<int64_t> kst = strides_of(ins[k].shape);
    int64_t o = first;
    for (int64_t d = 0; d < out.rank(); ++d) {
      int64_t cd = coord(static_cast<int64_t>(i), ost, out.shape, static_cast<size_t>(d));
      o += (d == axis ? cd - offset[k] : cd) * kst[d];
    }
    src[i] = static_cast<size_t>(o);
  }
  return [out, ins, src](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    std::vector<const mx::array*> from;
    for (const mx::array& a : in) from.push_back(&a);
    res.push_back(pick(from, src, out));
    return true;
  };
}

// dynamic_slice of a small operand at computed starts, clamped as the
// lowering clamps them (host_int::clamp_index_value).
HostForm dynamic_slice_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  const auto& sizes = inst.attr_ints("slice_sizes");
  const int64_t rank = out.rank();
  if (ins.size() != static_cast<size_t>(rank) + 1 || !movable(out.dtype) ||
      ins[0].dtype != out.dtype || ins[0].rank() != rank ||
      sizes.size() != static_cast<size_t>(rank))
    return {};
  for (int64_t d = 0; d < rank; ++d) {
    const TensorType& t = ins[static_cast<size_t>(d) + 1];
    if (sizes[d] != out.shape[d] || sizes[d] > ins[0].shape[d] || t.num_elements() != 1 ||
        !host_int::int_type(t.dtype) || t.dtype == DType::kPred)
      return {};
  }
  const std::vector<int64_t> ist = strides_of(ins[0].shape), ost = strides_of(out.shape);
  return [out, ins, rank, ist, ost](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    std::vector<int64_t> start(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d)
      start[d] = host_int::clamp_index_value(read_int_elem(in[static_cast<size_t>(d) + 1], 0),
                                             ins[static_cast<size_t>(d) + 1].dtype,
                                             ins[0].shape[d] - out.shape[d]);
    std::vector<size_t> src(static_cast<size_t>(out.num_elements()));
    for (size_t i = 0; i < src.size(); ++i) {
      int64_t o = 0;
      for (int64_t d = 0; d < rank; ++d)
        o += (start[d] + coord(static_cast<int64_t>(i), ost, out.shape, static_cast<size_t>(d))) *
             ist[d];
      src[i] = static_cast<size_t>(o);
    }
    res.push_back(pick({&in[0]}, src, out));
    return true;
  };
}

HostForm iota_kernel(const compiler::Plan& plan, const Instruction& inst) {
  const TensorType out = plan.type(inst.results[0]);
  if (!host_int::int_type(out.dtype) || out.dtype == DType::kPred) return {};
  int64_t dim = inst.attr_int("iota_dimension", -1);
  if (dim < 0 || dim >= out.rank()) return {};
  const std::vector<int64_t> st = strides_of(out.shape);
  std::vector<Int128> v(static_cast<size_t>(out.num_elements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = host_int::wrap((static_cast<int64_t>(i) / st[dim]) % out.shape[dim], out.dtype);
  return [out, v](const Arrays&, Arrays& res) {
    res.push_back(make_int_array(v, out));
    return true;
  };
}

// reduce(x, init) over `dimensions` with a body that is one integer or pred
// op of its two parameters (add, multiply, max, min, and, or, xor): the
// op is associative and commutative on wrapped integers, so any order gives
// the lowering's answer. Reducing only size-1 dims applies no init (as the
// lowering and XLA's simplifier).
HostForm reduce_kernel(const compiler::Plan& plan, const Instruction& inst, bool floats) {
  if (inst.operands.size() != 2 || inst.results.size() != 1 || inst.regions.size() != 1) return {};
  const compiler::Region& body = inst.regions[0];
  if (body.body.size() != 1 || body.params.size() != 2 || body.returns.size() != 1) return {};
  const Instruction& op = body.body[0];
  switch (op.op) {
    case Opcode::add: case Opcode::multiply: case Opcode::maximum: case Opcode::minimum:
    case Opcode::and_: case Opcode::or_: case Opcode::xor_:
      break;
    default:
      return {};
  }
  if (op.results.size() != 1 || body.returns[0] != op.results[0] || op.operands.size() != 2 ||
      !((op.operands[0] == body.params[0] && op.operands[1] == body.params[1]) ||
        (op.operands[0] == body.params[1] && op.operands[1] == body.params[0])))
    return {};
  if (!host_int::elementwise(plan, op))
    return floats ? float_reduce_kernel(plan, inst, op.op) : HostForm{};
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins[0].dtype != out.dtype || ins[1].num_elements() != 1 || ins[1].dtype != out.dtype)
    return {};
  int64_t count = 0;
  const std::vector<size_t> dst = reduce_targets(ins[0], inst.attr_ints("dimensions"), count);
  if (dst.empty() || count == 0) return {};
  const bool apply_init = count != 1;
  const compiler::Plan* pl = &plan;
  const Instruction* bp = &op;
  return [pl, bp, out, ins, dst, apply_init](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    const size_t n = static_cast<size_t>(out.num_elements());
    std::vector<Int128> acc(n);
    std::vector<bool> seen(n, false);
    for (size_t i = 0; i < dst.size(); ++i) {
      Int128 e = read_int_elem(in[0], i);
      size_t o = dst[i];
      if (!seen[o]) {
        acc[o] = e;
        seen[o] = true;
      } else {
        Int128 x[3] = {acc[o], e, 0};
        acc[o] = host_int::apply(*pl, *bp, x);
      }
    }
    if (apply_init) {
      Int128 init = read_int_elem(in[1], 0);
      for (size_t o = 0; o < n; ++o) {
        Int128 x[3] = {acc[o], init, 0};
        acc[o] = host_int::apply(*pl, *bp, x);
      }
    }
    res.push_back(make_int_array(acc, out));
    return true;
  };
}


}  // namespace

HostForm host_small_kernel(const compiler::Plan& plan, const Instruction& inst, bool floats) {
  if (inst.results.size() != 1 || !small(plan.type(inst.results[0]))) return {};
  for (ValueId v : inst.operands)
    if (!small(plan.type(v))) return {};
  switch (inst.op) {
    case Opcode::select:
      if (host_int::elementwise(plan, inst)) return elementwise_kernel(plan, inst);
      return select_kernel(plan, inst);
    case Opcode::broadcast_in_dim: return broadcast_kernel(plan, inst);
    case Opcode::bitcast_convert: return bitcast_kernel(plan, inst);
    case Opcode::reshape: return reshape_kernel(plan, inst);
    case Opcode::iota: return iota_kernel(plan, inst);
    case Opcode::slice: return slice_kernel(plan, inst);
    case Opcode::concatenate: return concatenate_kernel(plan, inst);
    case Opcode::dynamic_slice: return dynamic_slice_kernel(plan, inst);
    case Opcode::reduce: return reduce_kernel(plan, inst, floats);
    default:
      if (host_int::elementwise(plan, inst)) return elementwise_kernel(plan, inst);
      return floats ? float_kernel(plan, inst) : HostForm{};
  }
}

namespace {
// Threefry-2x32, 20 rounds (Salmon et al., SC'11), one block.
void threefry_block(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  x0 += ks[0];
  x1 += ks[1];
  for (uint32_t g = 1; g <= 5; ++g) {
    const int* rot = kRotations + ((g - 1) % 2) * 4;
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = x0 ^ ((x1 << rot[r]) | (x1 >> (32 - rot[r])));
    }
    x0 += ks[g % 3];
    x1 += ks[(g + 1) % 3] + g;
  }
}
}  // namespace

HostForm threefry2x32_call(const compiler::Plan& plan, const Instruction& call) {
  if (call.op != Opcode::call || call.operands.size() != 4 || call.results.size() != 2)
    return {};
  const std::string& callee = call.attr_str("callee", "");
  if (callee.rfind("threefry2x32", 0) != 0) return {};
  std::vector<TensorType> ins = operand_types(plan, call);
  const TensorType out = plan.type(call.results[0]);
  if (plan.type(call.results[1]) != out || out.dtype != DType::kU32 || !small(out)) return {};
  for (const TensorType& t : ins)
    if (t.dtype != DType::kU32 || (t.num_elements() != 1 && t != out)) return {};
  if (ins[2] != out || ins[3] != out) return {};
  return [ins, out](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    const size_t n = static_cast<size_t>(out.num_elements());
    const uint32_t* k0 = in[0].data<uint32_t>();
    const uint32_t* k1 = in[1].data<uint32_t>();
    const uint32_t* a = in[2].data<uint32_t>();
    const uint32_t* b = in[3].data<uint32_t>();
    std::vector<uint32_t> y0(n), y1(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t x0 = a[i], x1 = b[i];
      threefry_block(k0[in[0].size() == 1 ? 0 : i], k1[in[1].size() == 1 ? 0 : i], x0, x1);
      y0[i] = x0;
      y1[i] = x1;
    }
    const mx::Shape shape = to_mlx_shape(out.shape);
    res.push_back(mx::array(y0.begin(), shape, mx::uint32));
    res.push_back(mx::array(y1.begin(), shape, mx::uint32));
    return true;
  };
}

namespace {
bool host_function_at(const compiler::Plan& plan, const std::string& name, int depth,
                      bool floats) {
  const compiler::Function* f = plan.find_function(name);
  if (f == nullptr || depth > 8) return false;
  for (const Instruction& inst : f->body.body) {
    if (inst.op == Opcode::constant) continue;
    if (inst.op == Opcode::call) {
      if (!host_function_at(plan, inst.attr_str("callee", ""), depth + 1, floats)) return false;
      continue;
    }
    if (!host_small_kernel(plan, inst, floats)) return false;
  }
  return true;
}
}  // namespace

bool host_function(const compiler::Plan& plan, const std::string& name, bool floats) {
  return host_function_at(plan, name, 0, floats);
}

bool host_readable(const mx::array& a) { return readable(a); }

std::optional<std::vector<Int128>> computed_ints(const mx::array& a) {
  if (!readable(a)) return std::nullopt;
  switch (a.dtype()) {
    case mx::bool_: case mx::int8: case mx::int16: case mx::int32: case mx::int64:
    case mx::uint8: case mx::uint16: case mx::uint32: case mx::uint64:
      break;
    default:
      return std::nullopt;
  }
  std::vector<Int128> v(a.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = read_int_elem(a, i);
  return v;
}

std::optional<int64_t> computed_int(const mx::array& a) {
  if (a.size() != 1 || a.is_tracer() || !a.is_available() || a.data_size() != 1) return std::nullopt;
  switch (a.dtype()) {
    case mx::bool_: case mx::int8: case mx::int16: case mx::int32: case mx::int64:
    case mx::uint8: case mx::uint16: case mx::uint32:
      return static_cast<int64_t>(read_int_elem(a, 0));
    default:
      return std::nullopt;
  }
}

}  // namespace pjrtx::backend
