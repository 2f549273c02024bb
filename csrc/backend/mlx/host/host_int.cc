#include "backend/mlx/host/host_int.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::ValueId;
using U128 = unsigned __int128;

namespace {

int bits_of(DType t) { return t == DType::kPred ? 1 : compiler::dtype_bits(t); }

U128 low_bits(Int128 v, int bits) {
  U128 u = static_cast<U128>(v);
  return bits < 128 ? u & ((U128{1} << bits) - 1) : u;
}

Int128 sign_extend(U128 u, int bits) {
  Int128 s = static_cast<Int128>(u);
  if ((u >> (bits - 1)) & 1) s -= Int128{1} << bits;
  return s;
}

Int128 signed_min(DType t) { return -(Int128{1} << (compiler::dtype_bits(t) - 1)); }

}  // namespace

namespace host_int {

bool int_type(DType t) {
  if (t == DType::kPred) return true;
  return compiler::is_integer(t) && !compiler::is_subbyte_int(t) && compiler::dtype_bits(t) <= 64;
}

Int128 wrap(Int128 v, DType t) {
  if (t == DType::kPred) return v != 0;
  U128 u = low_bits(v, compiler::dtype_bits(t));
  return compiler::is_signed_int(t) ? sign_extend(u, compiler::dtype_bits(t))
                                    : static_cast<Int128>(u);
}

namespace {

bool elementwise_op(Opcode op) {
  switch (op) {
    case Opcode::add: case Opcode::subtract: case Opcode::multiply: case Opcode::divide:
    case Opcode::remainder: case Opcode::negate: case Opcode::abs: case Opcode::minimum:
    case Opcode::maximum: case Opcode::and_: case Opcode::or_: case Opcode::xor_:
    case Opcode::not_: case Opcode::compare: case Opcode::select: case Opcode::convert:
    case Opcode::clamp: case Opcode::shift_left: case Opcode::shift_right_logical:
    case Opcode::shift_right_arithmetic: case Opcode::sign:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool elementwise(const compiler::Plan& plan, const Instruction& inst) {
  if (!elementwise_op(inst.op) || !inst.regions.empty() || inst.results.size() != 1) return false;
  if (!int_type(plan.type(inst.results[0]).dtype)) return false;
  for (ValueId v : inst.operands)
    if (!int_type(plan.type(v).dtype)) return false;
  const DType t = plan.type(inst.results[0]).dtype;
  const bool pred = t == DType::kPred;
  switch (inst.op) {
    case Opcode::divide: case Opcode::remainder: case Opcode::negate: case Opcode::abs:
    case Opcode::shift_left: case Opcode::shift_right_logical:
    case Opcode::shift_right_arithmetic: case Opcode::sign:
      return !pred;
    case Opcode::compare: {
      if (inst.operands.size() != 2) return false;
      DType a = plan.type(inst.operands[0]).dtype;
      std::string ct = inst.attr_str("compare_type", "");
      if (ct.empty()) return true;
      if (ct == "SIGNED") return compiler::is_signed_int(a);
      if (ct == "UNSIGNED") return a == DType::kPred || compiler::is_unsigned_int(a);
      return false;  // FLOAT, TOTALORDER
    }
    default:
      return true;
  }
}

Int128 apply(const compiler::Plan& plan, const Instruction& inst, const Int128* x) {
  const DType t = plan.type(inst.results[0]).dtype;
  const bool pred = t == DType::kPred;
  auto in = [&](size_t i) { return x[i]; };
  switch (inst.op) {
    case Opcode::add:
      return pred ? (in(0) | in(1)) : wrap(static_cast<Int128>(static_cast<U128>(in(0)) +
                                                               static_cast<U128>(in(1))), t);
    case Opcode::subtract:
      return pred ? Int128{in(0) != in(1)}
                  : wrap(static_cast<Int128>(static_cast<U128>(in(0)) - static_cast<U128>(in(1))), t);
    case Opcode::multiply:
      return pred ? (in(0) & in(1)) : wrap(static_cast<Int128>(static_cast<U128>(in(0)) *
                                                               static_cast<U128>(in(1))), t);
    case Opcode::divide: {
      Int128 x = in(0), y = in(1);
      if (y == 0) return wrap(-1, t);  // all ones, signed or not
      if (compiler::is_signed_int(t) && x == signed_min(t) && y == -1) return x;
      return x / y;  // truncates, as XLA's does
    }
    case Opcode::remainder: {
      Int128 x = in(0), y = in(1);
      if (y == 0) return x;
      if (compiler::is_signed_int(t) && x == signed_min(t) && y == -1) return 0;
      return x % y;  // the dividend's sign
    }
    case Opcode::negate: return wrap(-in(0), t);
    case Opcode::sign: return in(0) > 0 ? 1 : in(0) < 0 ? -1 : 0;
    case Opcode::abs: return wrap(in(0) < 0 ? -in(0) : in(0), t);
    case Opcode::minimum: return in(0) < in(1) ? in(0) : in(1);
    case Opcode::maximum: return in(0) > in(1) ? in(0) : in(1);
    case Opcode::and_: return wrap(in(0) & in(1), t);
    case Opcode::or_: return wrap(in(0) | in(1), t);
    case Opcode::xor_: return wrap(in(0) ^ in(1), t);
    case Opcode::not_: return pred ? Int128{in(0) == 0} : wrap(~in(0), t);
    case Opcode::compare: {
      const std::string& d = inst.attr_str("comparison_direction");
      Int128 a = in(0), b = in(1);
      if (d == "EQ") return a == b;
      if (d == "NE") return a != b;
      if (d == "LT") return a < b;
      if (d == "LE") return a <= b;
      if (d == "GT") return a > b;
      if (d == "GE") return a >= b;
      throw Error(ErrorCode::kInternal, "pjrtx: host integer op: comparison_direction " + d);
    }
    case Opcode::select: return in(0) != 0 ? in(1) : in(2);
    case Opcode::convert: return wrap(in(0), t);
    case Opcode::clamp: {  // clamp(min, operand, max)
      Int128 x = in(1) < in(0) ? in(0) : in(1);
      return x > in(2) ? in(2) : x;
    }
    case Opcode::shift_left: case Opcode::shift_right_logical:
    case Opcode::shift_right_arithmetic: {
      // A count outside [0, bits), read as unsigned, gives 0 or the sign fill.
      const int bits = bits_of(t);
      U128 count = low_bits(in(1), bits);
      Int128 x = in(0);
      if (inst.op == Opcode::shift_left)
        return count >= static_cast<U128>(bits) ? 0 : wrap(static_cast<Int128>(low_bits(x, bits) << count), t);
      if (inst.op == Opcode::shift_right_logical)
        return count >= static_cast<U128>(bits) ? 0 : wrap(static_cast<Int128>(low_bits(x, bits) >> count), t);
      Int128 s = sign_extend(low_bits(x, bits), bits);  // unsigned values shift in their top bit
      if (count >= static_cast<U128>(bits)) return wrap(s < 0 ? -1 : 0, t);
      return wrap(s >> static_cast<int>(count), t);
    }
    default:
      throw Error(ErrorCode::kInternal, std::string("pjrtx: host integer op: unexpected ") +
                                            std::string(compiler::opcode_name(inst.op)));
  }
}

int64_t type_max(DType t) {
  int bits = compiler::dtype_bits(t);
  if (compiler::is_unsigned_int(t)) return bits >= 64 ? INT64_MAX : (int64_t{1} << bits) - 1;
  return bits >= 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1;
}

int32_t clamp_index_value(Int128 x, DType t, int64_t hi) {
  hi = std::max<int64_t>(hi, 0);
  if (hi <= type_max(t) && x > hi) x = hi;
  if (compiler::is_signed_int(t) && x < 0) x = 0;
  return static_cast<int32_t>(x);
}

}  // namespace host_int

}  // namespace pjrtx::backend
