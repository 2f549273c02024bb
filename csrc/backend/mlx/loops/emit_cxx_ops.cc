// The host loop engine's one-instruction dispatch (emitter.h) and the ops
// it emits in place: unary and binary arithmetic with XLA:CPU's integer and
// float edge semantics (the prelude's h_* functions), compares, converts,
// bitcasts, select, clamp, iota, broadcasts, reshapes, transposes, slices,
// dynamic slices and updates, concatenate, reverse, constants; the array
// ops go to emit_cxx_arrays.cc, control flow to emit_cxx.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "backend/mlx/loops/emitter.h"

namespace pjrtx::backend::loops::emitter {

void Emitter::emit(const Instruction& inst, const std::vector<bool>& consume) {
  ++ops_;
  // Work: the elements an op writes per run. Ops that update a buffer in
  // place count their updates (and a copy, where they must make one);
  // control flow and pass-through ops count what they run inside.
  switch (inst.op) {
    case Opcode::dynamic_update_slice: case Opcode::scatter: case Opcode::reshape:
    case Opcode::optimization_barrier: case Opcode::while_: case Opcode::call:
    case Opcode::case_: case Opcode::if_: case Opcode::constant:
      break;
    default:
      for (ValueId r : inst.results) work_ += std::max<int64_t>(count(r), 1);
  }
  auto in = [&](size_t i) { return name(inst.operands.at(i)); };
  auto el = [&](size_t i, const std::string& k) {
    return count(inst.operands.at(i)) == 1 ? in(i) + ".d[0]" : in(i) + ".d[" + k + "]";
  };
  const std::string T = inst.results.empty() ? "" : elem(inst.results[0]);
  auto unary = [&](const std::string& f) {
    std::string r = decl(inst.results[0]);
    line(each(inst.results[0]) + r + ".d[k] = " + f + "(" +
         el(0, "k") + ");");
  };
  auto binary = [&](const std::string& f) {
    std::string r = decl(inst.results[0]);
    line(each(inst.results[0]) + r + ".d[k] = " + f + "<" + T +
         ">(" + el(0, "k") + ", " + el(1, "k") + ");");
  };
  const bool flt = !T.empty() && (T == "float" || T == "double");
  bool cplx = false;
  for (ValueId v : inst.operands) cplx = cplx || compiler::is_complex(type(v).dtype);
  for (ValueId v : inst.results) cplx = cplx || compiler::is_complex(type(v).dtype);
  if (cplx && !complex_op(inst.op)) unsupported(inst, "on complex");
  if (cplx && inst.op == Opcode::convert && !compiler::is_complex(type(inst.results[0]).dtype))
    unsupported(inst, "from complex to " + type(inst.results[0]).str());
  if (cplx && inst.op == Opcode::custom_call && !is_callback(inst)) unsupported(inst, "on complex");
  auto float_only = [&](const std::string& f) {
    if (!flt) unsupported(inst, "on " + type(inst.results[0]).str());
    unary(f);
  };
  if (T == "bool") {
    switch (inst.op) {
      case Opcode::divide: case Opcode::remainder: case Opcode::power: case Opcode::negate:
      case Opcode::abs: case Opcode::sign: case Opcode::shift_left: case Opcode::shift_right_logical:
      case Opcode::shift_right_arithmetic: case Opcode::popcnt: case Opcode::count_leading_zeros:
        unsupported(inst, "on pred");
      default:
        break;
    }
  }
  switch (inst.op) {
    case Opcode::add: return binary("h_add");
    case Opcode::subtract: return binary("h_sub");
    case Opcode::multiply: return binary("h_mul");
    case Opcode::divide: return binary("h_div");
    case Opcode::remainder: return binary("h_rem");
    case Opcode::maximum: return binary("h_max");
    case Opcode::minimum: return binary("h_min");
    case Opcode::power: return binary("h_pow");
    case Opcode::and_: return binary("h_and");
    case Opcode::or_: return binary("h_or");
    case Opcode::xor_: return binary("h_xor");
    case Opcode::shift_left: return binary("h_shl");
    case Opcode::shift_right_logical: return binary("h_shrl");
    case Opcode::shift_right_arithmetic: return binary("h_shra");
    case Opcode::atan2:
      if (!flt) unsupported(inst);
      return binary("h_atan2");
    case Opcode::not_: return unary("h_not");
    case Opcode::negate: return unary("h_neg");
    case Opcode::abs: return unary("h_abs");
    case Opcode::sign: return unary("h_sign");
    case Opcode::popcnt: return unary("h_popcnt");
    case Opcode::count_leading_zeros: return unary("h_clz");
    case Opcode::sqrt: return float_only("m_sqrt");
    case Opcode::rsqrt: return float_only("h_rsqrt");
    case Opcode::cbrt: return float_only("m_cbrt");
    case Opcode::exponential: return float_only("m_exp");
    case Opcode::exponential_minus_one: return float_only("m_expm1");
    case Opcode::log: return float_only("m_log");
    case Opcode::log_plus_one: return float_only("m_log1p");
    case Opcode::logistic: return float_only("h_logistic");
    case Opcode::sine: return float_only("m_sin");
    case Opcode::cosine: return float_only("m_cos");
    case Opcode::tan: return float_only("m_tan");
    case Opcode::tanh: return float_only("m_tanh");
    case Opcode::custom_call:
      if (is_callback(inst)) return emit_callback(inst);
      if (const char* f = mhlo_chlo_function(inst)) return float_only(f);
      unsupported(inst);
    case Opcode::floor: return float_only("m_floor");
    case Opcode::ceil: return float_only("m_ceil");
    case Opcode::round_nearest_even: return float_only("h_rne");
    case Opcode::round_nearest_afz: return float_only("h_afz");
    case Opcode::is_finite: {
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = h_isfinite(" +
           el(0, "k") + ");");
      return;
    }
    case Opcode::convert: {
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = cv<" + T + ", " +
           elem(inst.operands[0]) + ">(" + el(0, "k") + ");");
      return;
    }
    case Opcode::bitcast_convert: {
      const TensorType& from = type(inst.operands[0]);
      const TensorType& to = type(inst.results[0]);
      if (to.dtype == DType::kPred || from.dtype == DType::kPred) unsupported(inst, "on pred");
      const int64_t bytes = count(inst.results[0]) * compiler::dtype_size(to.dtype);
      if (from.shape != to.shape) {
        // Between widths (JAX's u32[2] <-> u64 of a random key): the
        // narrow elements of the last dimension are the wide one's bytes,
        // first at the lowest address, so row-major memory is unchanged
        // (little-endian hosts, as literal() assumes).
        if (bytes != count(inst.operands[0]) * compiler::dtype_size(from.dtype)) unsupported(inst, "sizes");
        std::string r = decl(inst.results[0]);
        if (bytes) line("__builtin_memcpy(" + r + ".d, " + in(0) + ".d, " + std::to_string(bytes) + "L);");
        return;
      }
      if (compiler::dtype_size(from.dtype) != compiler::dtype_size(to.dtype)) unsupported(inst, "sizes");
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = bitcast<" + T + ", " +
           elem(inst.operands[0]) + ">(" + el(0, "k") + ");");
      return;
    }
    case Opcode::compare: return emit_compare(inst, el);
    case Opcode::real: case Opcode::imag: {
      if (!compiler::is_complex(type(inst.operands[0]).dtype)) unsupported(inst, "of a real operand");
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = " + el(0, "k") +
           (inst.op == Opcode::real ? ".re;" : ".im;"));
      return;
    }
    case Opcode::complex: {
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = " + T + "{" + el(0, "k") +
           ", " + el(1, "k") + "};");
      return;
    }
    case Opcode::select: {
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = " + el(0, "k") +
           " ? " + el(1, "k") + " : " + el(2, "k") + ";");
      return;
    }
    case Opcode::fused_multiply_add: {
      // One rounding, XLA:CPU's contraction (fma_contract.h).
      if (!flt) unsupported(inst, "on " + type(inst.results[0]).str());
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = m_fma(" +
           el(0, "k") + ", " + el(1, "k") + ", " + el(2, "k") + ");");
      return;
    }
    case Opcode::clamp: {
      std::string r = decl(inst.results[0]);
      line(each(inst.results[0]) + r + ".d[k] = h_min<" + T +
           ">(h_max<" + T + ">(" + el(1, "k") + ", " + el(0, "k") + "), " + el(2, "k") + ");");
      return;
    }
    case Opcode::constant: return emit_constant(inst);
    case Opcode::iota: {
      const Shape& s = type(inst.results[0]).shape;
      int64_t d = inst.attr_int("iota_dimension");
      if (d < 0 || d >= static_cast<int64_t>(s.size())) unsupported(inst, "iota_dimension");
      std::string r = decl(inst.results[0]);
      loops(s, [&](const std::vector<std::string>& iv) {
        line(r + ".d[" + flat(s, iv) + "] = cv<" + T + ", long>(" + iv[d] + ");");
      });
      return;
    }
    case Opcode::reshape:
    case Opcode::optimization_barrier: {
      for (size_t k = 0; k < inst.results.size(); ++k) {
        ValueId v = inst.results[k];
        std::string n = value_name(v);
        if (consume[k] && buf_type(v) == buf_type(inst.operands[k]))
          line(buf_type(v) + " " + n + "(mv(" + in(k) + "));");
        else {
          work_ += count(v);
          line(buf_type(v) + " " + n + " = copy_as<" + buf_type(v) + ">(" + in(k) + ", " + n_of(v) + ");");
        }
        names_[v] = n;
        movable_.insert(n);
      }
      return;
    }
    case Opcode::broadcast_in_dim: {
      const Shape& os = type(inst.results[0]).shape;
      const Shape& is = type(inst.operands[0]).shape;
      auto bd = inst.attr_ints("broadcast_dimensions");
      auto ist = strides_of(is);
      std::string r = decl(inst.results[0]);
      loops(os, [&](const std::vector<std::string>& iv) {
        std::vector<std::pair<std::string, int64_t>> t;
        for (size_t j = 0; j < bd.size(); ++j)
          if (is[j] != 1) t.push_back({iv.at(bd[j]), ist[j]});
        line(r + ".d[" + flat(os, iv) + "] = " + in(0) + ".d[" + affine(0, t) + "];");
      });
      return;
    }
    case Opcode::transpose: {
      const Shape& os = type(inst.results[0]).shape;
      auto perm = inst.attr_ints("permutation");
      auto ist = strides_of(type(inst.operands[0]).shape);
      std::string r = decl(inst.results[0]);
      loops(os, [&](const std::vector<std::string>& iv) {
        std::vector<std::pair<std::string, int64_t>> t;
        for (size_t j = 0; j < perm.size(); ++j) t.push_back({iv[j], ist.at(perm[j])});
        line(r + ".d[" + flat(os, iv) + "] = " + in(0) + ".d[" + affine(0, t) + "];");
      });
      return;
    }
    case Opcode::reverse: {
      const Shape& os = type(inst.results[0]).shape;
      auto dims = inst.attr_ints("dimensions");
      auto ist = strides_of(os);
      std::string r = decl(inst.results[0]);
      loops(os, [&](const std::vector<std::string>& iv) {
        std::vector<std::pair<std::string, int64_t>> t;
        int64_t base = 0;
        for (size_t j = 0; j < os.size(); ++j) {
          bool rev = std::count(dims.begin(), dims.end(), static_cast<int64_t>(j)) > 0;
          if (rev) {
            base += (os[j] - 1) * ist[j];
            t.push_back({iv[j], -ist[j]});
          } else {
            t.push_back({iv[j], ist[j]});
          }
        }
        line(r + ".d[" + flat(os, iv) + "] = " + in(0) + ".d[" + affine(base, t) + "];");
      });
      return;
    }
    case Opcode::slice: {
      const Shape& os = type(inst.results[0]).shape;
      auto start = inst.attr_ints("start_indices");
      auto strides = inst.attr_ints("strides", std::vector<int64_t>(os.size(), 1));
      auto ist = strides_of(type(inst.operands[0]).shape);
      std::string r = decl(inst.results[0]);
      loops(os, [&](const std::vector<std::string>& iv) {
        std::vector<std::pair<std::string, int64_t>> t;
        int64_t base = 0;
        for (size_t j = 0; j < os.size(); ++j) {
          base += start[j] * ist[j];
          t.push_back({iv[j], strides[j] * ist[j]});
        }
        line(r + ".d[" + flat(os, iv) + "] = " + in(0) + ".d[" + affine(base, t) + "];");
      });
      return;
    }
    case Opcode::concatenate: {
      const Shape& os = type(inst.results[0]).shape;
      int64_t dim = inst.attr_int("dimension");
      auto ost = strides_of(os);
      std::string r = decl(inst.results[0]);
      int64_t off = 0;
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        const Shape& is = type(inst.operands[k]).shape;
        loops(is, [&](const std::vector<std::string>& iv) {
          std::vector<std::pair<std::string, int64_t>> t;
          for (size_t j = 0; j < is.size(); ++j) t.push_back({iv[j], ost[j]});
          line(r + ".d[" + affine(off * ost[dim], t) + "] = " + in(k) + ".d[" + flat(is, iv) + "];");
        });
        off += is.at(dim);
      }
      return;
    }
    case Opcode::pad: return emit_pad(inst);
    case Opcode::dynamic_slice: {
      const Shape& is = type(inst.operands[0]).shape;
      const Shape& os = type(inst.results[0]).shape;
      auto ist = strides_of(is);
      std::vector<std::string> starts;
      for (size_t j = 0; j < is.size(); ++j) {
        std::string s = fresh("st");
        line("const long " + s + " = clampi(idx(" + el(1 + j, "0") + "), 0L, " +
             std::to_string(is[j] - os[j]) + "L);");
        starts.push_back(s);
      }
      std::string r = decl(inst.results[0]);
      loops(os, [&](const std::vector<std::string>& iv) {
        std::string src;
        for (size_t j = 0; j < is.size(); ++j)
          src += "(" + starts[j] + " + " + iv[j] + ") * " + std::to_string(ist[j]) + "L + ";
        line(r + ".d[" + flat(os, iv) + "] = " + in(0) + ".d[" + src + "0L];");
      });
      return;
    }
    case Opcode::dynamic_update_slice: {
      const Shape& is = type(inst.operands[0]).shape;
      const Shape& us = type(inst.operands[1]).shape;
      auto ist = strides_of(is);
      std::vector<std::string> starts;
      for (size_t j = 0; j < is.size(); ++j) {
        std::string s = fresh("st");
        line("const long " + s + " = clampi(idx(" + el(2 + j, "0") + "), 0L, " +
             std::to_string(is[j] - us[j]) + "L);");
        starts.push_back(s);
      }
      std::string r = take_or_copy(inst.results[0], inst.operands[0], consume[0]);
      work_ += count(inst.operands[1]);
      loops(us, [&](const std::vector<std::string>& iv) {
        std::string dst;
        for (size_t j = 0; j < is.size(); ++j)
          dst += "(" + starts[j] + " + " + iv[j] + ") * " + std::to_string(ist[j]) + "L + ";
        line(r + ".d[" + dst + "0L] = " + in(1) + ".d[" + flat(us, iv) + "];");
      });
      return;
    }
    case Opcode::dot:
    case Opcode::dot_general: return emit_dot(inst);
    case Opcode::reduce: return emit_reduce(inst);
    case Opcode::gather: return emit_gather(inst);
    case Opcode::scatter: return emit_scatter(inst, consume);
    case Opcode::sort: return emit_sort(inst);
    case Opcode::cholesky: return emit_cholesky(inst);
    case Opcode::rng_bit_generator: return emit_rng_bit_generator(inst);
    case Opcode::triangular_solve: return emit_triangular_solve(inst);
    case Opcode::while_: {
      std::vector<std::string> init;
      for (size_t k = 0; k < inst.operands.size(); ++k) init.push_back(in(k));
      auto st = emit_while(inst, init, consume);
      for (size_t k = 0; k < inst.results.size(); ++k) {
        names_[inst.results[k]] = st[k];
        movable_.insert(st[k]);
      }
      return;
    }
    case Opcode::case_: {
      std::string s = fresh("sel");
      line("const long " + s + " = idx(" + el(0, "0") + ");");
      // Out of range runs the last branch.
      std::string c = fresh("br");
      line("const long " + c + " = (" + s + " < 0 || " + s + " >= " +
           std::to_string(inst.regions.size()) + "L) ? " + std::to_string(inst.regions.size() - 1) +
           "L : " + s + ";");
      return emit_branches(inst, c);
    }
    case Opcode::if_: return emit_branches(inst, el(0, "0"));
    case Opcode::call: return emit_call(inst, consume);
    default: unsupported(inst);
  }
}

// The result buffer of an op that updates its first operand: the operand's
// own buffer at its last use, else a copy.
std::string Emitter::take_or_copy(ValueId result, ValueId operand, bool consume) {
  std::string n = value_name(result);
  if (consume && buf_type(result) == buf_type(operand)) {
    line(buf_type(result) + " " + n + "(mv(" + name(operand) + "));");
  } else {
    work_ += count(result);
    line(buf_type(result) + " " + n + " = copy_as<" + buf_type(result) + ">(" + name(operand) + ", " +
         n_of(result) + ");");
  }
  names_[result] = n;
  movable_.insert(n);
  return n;
}

template <class El>
void Emitter::emit_compare(const Instruction& inst, const El& el) {
  const std::string& d = inst.attr_str("comparison_direction");
  std::string op = d == "EQ" ? "==" : d == "NE" ? "!=" : d == "LT" ? "<" : d == "LE" ? "<=" : d == "GT" ? ">" : d == "GE" ? ">=" : "";
  if (op.empty()) unsupported(inst, "comparison_direction " + d);
  DType t = type(inst.operands[0]).dtype;
  std::string ct = inst.attr_str("compare_type", "");
  bool total = ct == "TOTALORDER";
  if (ct == "SIGNED" && !compiler::is_signed_int(t)) unsupported(inst, "SIGNED compare of " + type(inst.operands[0]).str());
  if (ct == "UNSIGNED" && !(compiler::is_unsigned_int(t) || t == DType::kPred))
    unsupported(inst, "UNSIGNED compare of " + type(inst.operands[0]).str());
  if (compiler::is_complex(t) && (total || (op != "==" && op != "!=")))
    unsupported(inst, ct + " " + d + " compare of complex");
  if ((ct == "FLOAT" || total) && !compiler::is_float(t) && !compiler::is_complex(t))
    unsupported(inst, ct + " compare of integers");
  std::string r = decl(inst.results[0]);
  std::string a = el(0, "k"), b = el(1, "k");
  if (total) {
    a = "h_tot(" + a + ")";
    b = "h_tot(" + b + ")";
  }
  line(each(inst.results[0]) + r + ".d[k] = " + a + " " + op + " " + b + ";");
}

void Emitter::emit_constant(const Instruction& inst) {
  const compiler::DenseData& dd = inst.attr_dense("value");
  ValueId v = inst.results[0];
  DType t = type(v).dtype;
  int64_t n = count(v);
  int64_t es = compiler::dtype_size(t);
  if (dd.splat || n <= 1) {
    std::string r = decl(v);
    if (n > 0) {
      if (dd.bytes.size() < static_cast<size_t>(es)) unsupported(inst, "constant bytes");
      line(each(v) + r + ".d[k] = " + literal(t, dd.bytes.data()) + ";");
    }
    return;
  }
  if (n > (1 << 16)) unsupported(inst, "a constant of " + type(v).str() + " inside the loop");
  if (dd.bytes.size() < static_cast<size_t>(n * es)) unsupported(inst, "constant bytes");
  std::string arr = fresh("cst");
  std::string s = "static const " + std::string(ctype(t)) + " " + arr + "[] = {";
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += literal(t, dd.bytes.data() + i * es);
  }
  line(s + "};");
  std::string nm = value_name(v);
  line("const C<" + std::string(ctype(t)) + "> " + nm + "{" + arr + "};");
  names_[v] = nm;
}

// A host callback: results declared here, then one call through the
// engine with the operands' and results' storage (row-major, pred one byte,
// as host_callback.h's HostArray). The engine maps the index to the
// callable and marks the thread as in a callback, as ops/callback.cc does.
void Emitter::emit_callback(const Instruction& inst) {
  const std::optional<uint64_t> id = parse_callback_id(inst.attr_str("backend_config", ""));
  if (!id) unsupported(inst, "no callback id");
  LoopCallback cb;
  cb.id = *id;
  cb.effect = inst.attr_bool("has_side_effect", false);
  for (ValueId v : inst.operands) cb.args.push_back(type(v));
  for (ValueId v : inst.results) cb.results.push_back(type(v));
  std::vector<std::string> res;
  for (ValueId v : inst.results) res.push_back(decl(v));
  // As XLA:CPU (and ops/callback.cc): a pure callback whose results are all
  // empty is never called.
  bool all_empty = !inst.results.empty();
  for (ValueId v : inst.results) all_empty = all_empty && count(v) == 0;
  if (!cb.effect && all_empty) return;
  const std::string k = std::to_string(callbacks_.size());
  callbacks_.push_back(std::move(cb));
  std::string a = "{nullptr", r = "{nullptr";
  for (ValueId v : inst.operands) a += ", " + name(v) + ".d";
  for (const std::string& n : res) r += ", " + n + ".d";
  line("{");
  line("  const void* const a[] = " + a + "};");
  line("  void* const r[] = " + r + "};");
  line("  host_call(" + k + "L, a + 1, r + 1);");
  line("}");
}

}  // namespace pjrtx::backend::loops::emitter
