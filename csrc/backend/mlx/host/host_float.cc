// Host forms of small f32/f64 arithmetic (host_small.h).
#include "backend/mlx/host/host_float.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <mlx/ops.h>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_small_detail.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::TensorType;
using compiler::ValueId;
using namespace host_detail;

namespace {

// f32 and f64 element-wise ops with one IEEE answer (correctly rounded, or
// no rounding at all), computed as the lowerings compute them on MLX, so a
// value gets the same bits on either side: + - * /, sqrt, neg, abs, floor,
// float32 multiply-adds (rounded once, as host/fma_kernel.cc's),
// ceil, round-half-even, sign, is_finite, FLOAT compares, XLA's max, min
// and clamp (NaN propagates, -0 < +0: ops/common.h's ieee_maximum), and
// converts between these, integers and pred (float -> int saturates with
// NaN -> 0, as ops/convert.cc). exp, log, tanh and the other transcendental
// kernels round differently in every library, so they stay on MLX.
bool host_float_type(DType t) { return t == DType::kF32 || t == DType::kF64; }

template <typename T>
T xla_max(T a, T b) {
  if (a == b) return a == 0 ? a + b : a;  // max(-0, +0) = +0
  if (std::isnan(a)) return a;
  return a > b ? a : b;  // b when b is NaN
}

template <typename T>
T xla_min(T a, T b) {
  if (a == b) return a == 0 ? -((-a) + (-b)) : a;  // min(-0, +0) = -0
  if (std::isnan(a)) return a;
  return a < b ? a : b;
}

enum class FloatOp {
  kAdd, kSub, kMul, kDiv, kMax, kMin, kNeg, kAbs, kSqrt, kFloor, kCeil, kRound, kSign,
  kIsFinite, kClamp, kFma, kCompare, kConvert,
};

std::optional<FloatOp> float_op(Opcode op) {
  switch (op) {
    case Opcode::add: return FloatOp::kAdd;
    case Opcode::subtract: return FloatOp::kSub;
    case Opcode::multiply: return FloatOp::kMul;
    case Opcode::divide: return FloatOp::kDiv;
    case Opcode::maximum: return FloatOp::kMax;
    case Opcode::minimum: return FloatOp::kMin;
    case Opcode::negate: return FloatOp::kNeg;
    case Opcode::abs: return FloatOp::kAbs;
    case Opcode::sqrt: return FloatOp::kSqrt;
    case Opcode::floor: return FloatOp::kFloor;
    case Opcode::ceil: return FloatOp::kCeil;
    case Opcode::round_nearest_even: return FloatOp::kRound;
    case Opcode::sign: return FloatOp::kSign;
    case Opcode::is_finite: return FloatOp::kIsFinite;
    case Opcode::clamp: return FloatOp::kClamp;
    case Opcode::fused_multiply_add: return FloatOp::kFma;
    case Opcode::compare: return FloatOp::kCompare;
    case Opcode::convert: return FloatOp::kConvert;
    default: return std::nullopt;
  }
}

// Element i of a computed f32 or f64 array, exactly.
double read_float_elem(const mx::array& a, size_t i) {
  return a.dtype() == mx::float32 ? a.data<float>()[i] : a.data<double>()[i];
}

// One element of a float op on operands of float type T.
template <typename T>
T float_apply(FloatOp op, const T* x) {
  switch (op) {
    case FloatOp::kAdd: return x[0] + x[1];
    case FloatOp::kSub: return x[0] - x[1];
    case FloatOp::kMul: return x[0] * x[1];
    case FloatOp::kDiv: return x[0] / x[1];
    case FloatOp::kMax: return xla_max(x[0], x[1]);
    case FloatOp::kMin: return xla_min(x[0], x[1]);
    case FloatOp::kNeg: return -x[0];
    case FloatOp::kAbs: return std::fabs(x[0]);
    case FloatOp::kSqrt: return std::sqrt(x[0]);
    case FloatOp::kFloor: return std::floor(x[0]);
    case FloatOp::kCeil: return std::ceil(x[0]);
    case FloatOp::kRound: return std::nearbyint(x[0]);  // ties to even
    case FloatOp::kSign:
      // sign(NaN) = NaN, sign(+-0) = +-0 (ops/elementwise.cc's lower_sign).
      return std::isnan(x[0]) || x[0] == 0 ? x[0] : x[0] > 0 ? T(1) : T(-1);
    case FloatOp::kClamp: return xla_min(xla_max(x[1], x[0]), x[2]);  // clamp(lo, x, hi)
    case FloatOp::kFma: return std::fma(x[0], x[1], x[2]);  // f32 only (fma_contract.h)
    default: return x[0];
  }
}

// float -> integer type `to`: NaN -> 0, saturating at the type's bounds,
// truncating toward zero in between (ops/convert.cc's float_to_int).
template <typename T>
Int128 float_to_int(T x, DType to) {
  const int bits = compiler::dtype_bits(to);
  const bool is_signed = compiler::is_signed_int(to);
  const T hi = static_cast<T>(std::ldexp(1.0, is_signed ? bits - 1 : bits));
  if (std::isnan(x)) return 0;
  if (x >= hi) return is_signed ? (Int128{1} << (bits - 1)) - 1 : (Int128{1} << bits) - 1;
  const T lo = is_signed ? -hi : T(0);
  return static_cast<Int128>(x < lo ? lo : std::trunc(x));
}

}  // namespace

HostForm float_kernel(const compiler::Plan& plan, const Instruction& inst) {
  std::optional<FloatOp> op = float_op(inst.op);
  if (!op || !inst.regions.empty() || inst.results.size() != 1) return {};
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (ins.empty() || ins.size() > 3) return {};
  const int64_t n = out.num_elements();
  for (const TensorType& t : ins)
    if (t.num_elements() != n && t.num_elements() != 1) return {};
  const DType from = ins[0].dtype;
  enum Dir { kEQ, kNE, kLT, kLE, kGT, kGE } dir = kEQ;
  if (*op == FloatOp::kConvert) {
    // One side f32/f64, the other f32/f64, an integer type up to 64 bits or pred.
    const bool f_in = host_float_type(from), f_out = host_float_type(out.dtype);
    if (!(f_in || f_out) || !(f_in || host_int::int_type(from)) ||
        !(f_out || host_int::int_type(out.dtype)))
      return {};
  } else {
    if (!host_float_type(from)) return {};
    for (const TensorType& t : ins)
      if (t.dtype != from) return {};
    if (*op == FloatOp::kCompare) {
      if (ins.size() != 2 || out.dtype != DType::kPred) return {};
      const std::string ct = inst.attr_str("compare_type", "");
      if (ct != "" && ct != "FLOAT") return {};  // TOTALORDER stays with MLX
      const std::string& d = inst.attr_str("comparison_direction");
      if (d == "EQ") dir = kEQ;
      else if (d == "NE") dir = kNE;
      else if (d == "LT") dir = kLT;
      else if (d == "LE") dir = kLE;
      else if (d == "GT") dir = kGT;
      else if (d == "GE") dir = kGE;
      else return {};
    } else if (*op == FloatOp::kIsFinite) {
      if (ins.size() != 1 || out.dtype != DType::kPred) return {};
    } else {
      if (*op == FloatOp::kFma && from != DType::kF32) return {};
      const size_t arity = *op == FloatOp::kClamp || *op == FloatOp::kFma ? 3
                           : (*op <= FloatOp::kMin) ? 2
                                                    : 1;
      if (ins.size() != arity || out.dtype != from) return {};
    }
  }
  const FloatOp fop = *op;
  return [fop, out, ins, n, from, dir](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    auto at = [&](size_t k, int64_t i) { return in[k].size() == 1 ? 0 : static_cast<size_t>(i); };
    const mx::Shape shape = to_mlx_shape(out.shape);
    if (fop == FloatOp::kCompare || fop == FloatOp::kIsFinite ||
        (fop == FloatOp::kConvert && !host_float_type(out.dtype))) {
      // A pred or integer result.
      std::vector<Int128> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const double a = read_float_elem(in[0], at(0, i));
        Int128 r;
        if (fop == FloatOp::kIsFinite) {
          r = std::isfinite(a);
        } else if (fop == FloatOp::kConvert) {
          r = out.dtype == DType::kPred ? Int128{a != 0}
              : from == DType::kF32    ? float_to_int(static_cast<float>(a), out.dtype)
                                       : float_to_int(a, out.dtype);
        } else {
          const double b = read_float_elem(in[1], at(1, i));
          switch (dir) {  // f32 values compare the same widened to double
            case kEQ: r = a == b; break;
            case kNE: r = a != b; break;
            case kLT: r = a < b; break;
            case kLE: r = a <= b; break;
            case kGT: r = a > b; break;
            default: r = a >= b; break;
          }
        }
        v[static_cast<size_t>(i)] = r;
      }
      res.push_back(make_int_array(v, out));
      return true;
    }
    auto compute = [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        if (fop == FloatOp::kConvert) {
          const mx::array& a = in[0];
          const size_t j = at(0, i);
          // The C conversion MLX's astype does, from the stored type.
          switch (a.dtype()) {
            case mx::float32: v[i] = static_cast<T>(a.data<float>()[j]); break;
            case mx::float64: v[i] = static_cast<T>(a.data<double>()[j]); break;
            case mx::bool_: v[i] = a.data<bool>()[j] ? T(1) : T(0); break;
            case mx::int8: v[i] = static_cast<T>(a.data<int8_t>()[j]); break;
            case mx::int16: v[i] = static_cast<T>(a.data<int16_t>()[j]); break;
            case mx::int32: v[i] = static_cast<T>(a.data<int32_t>()[j]); break;
            case mx::int64: v[i] = static_cast<T>(a.data<int64_t>()[j]); break;
            case mx::uint8: v[i] = static_cast<T>(a.data<uint8_t>()[j]); break;
            case mx::uint16: v[i] = static_cast<T>(a.data<uint16_t>()[j]); break;
            case mx::uint32: v[i] = static_cast<T>(a.data<uint32_t>()[j]); break;
            default: v[i] = static_cast<T>(a.data<uint64_t>()[j]); break;
          }
          continue;
        }
        T x[3] = {0, 0, 0};
        for (size_t k = 0; k < in.size(); ++k)
          x[k] = static_cast<T>(read_float_elem(in[k], at(k, i)));
        v[static_cast<size_t>(i)] = float_apply<T>(fop, x);
      }
      return mx::array(v.begin(), shape, to_mlx(out.dtype));
    };
    res.push_back(out.dtype == DType::kF32 ? compute(float{}) : compute(double{}));
    return true;
  };
}

// An f32 or f64 reduce whose answer does not depend on the order of the
// terms, as the lowering (ops/reduce.cc) computes it: max and min (XLA's,
// NaN propagates and -0 < +0) of any count, and sums of one term (a
// reshape, no init) or two (MLX accumulates from +0: 0 + ((0 + a) + b), the
// same in every order and on every device). Longer float sums stay on MLX,
// whose order differs by device.
HostForm float_reduce_kernel(const compiler::Plan& plan, const Instruction& inst, Opcode body) {
  if (body != Opcode::add && body != Opcode::maximum && body != Opcode::minimum) return {};
  const TensorType out = plan.type(inst.results[0]);
  std::vector<TensorType> ins = operand_types(plan, inst);
  if (!host_float_type(out.dtype) || ins[0].dtype != out.dtype || ins[1].dtype != out.dtype ||
      ins[1].num_elements() != 1)
    return {};
  int64_t count = 0;
  std::vector<size_t> dst = reduce_targets(ins[0], inst.attr_ints("dimensions"), count);
  if (dst.empty() || count == 0 || (body == Opcode::add && count > 2)) return {};
  const FloatOp fop = body == Opcode::add ? FloatOp::kAdd
                      : body == Opcode::maximum ? FloatOp::kMax
                                                : FloatOp::kMin;
  return [fop, out, ins, dst, count](const Arrays& in, Arrays& res) {
    if (!all_readable(in, ins)) return false;
    auto compute = [&](auto zero) {
      using T = decltype(zero);
      const size_t n = static_cast<size_t>(out.num_elements());
      std::vector<T> acc(n);
      std::vector<bool> seen(n, false);
      const T* x = in[0].data<T>();
      for (size_t i = 0; i < dst.size(); ++i) {
        const size_t o = dst[i];
        if (!seen[o]) {
          acc[o] = x[i];
        } else if (fop == FloatOp::kAdd) {
          acc[o] = (T(0) + acc[o]) + x[i];  // from +0, as MLX accumulates
        } else {
          T p[2] = {acc[o], x[i]};
          acc[o] = float_apply<T>(fop, p);
        }
        seen[o] = true;
      }
      if (count != 1) {  // one term is a reshape: no init
        const T init = in[1].data<T>()[0];
        for (size_t o = 0; o < n; ++o) {
          if (fop == FloatOp::kAdd) {
            acc[o] = T(0) + acc[o];
            // The lowering leaves out an init of +-0 (never visible: the sum
            // is not -0) and adds any other.
            if (init != 0) acc[o] = acc[o] + init;
          } else {
            T p[2] = {acc[o], init};
            acc[o] = float_apply<T>(fop, p);
          }
        }
      }
      return mx::array(acc.begin(), to_mlx_shape(out.shape), to_mlx(out.dtype));
    };
    res.push_back(out.dtype == DType::kF32 ? compute(float{}) : compute(double{}));
    return true;
  };
}

}  // namespace pjrtx::backend
