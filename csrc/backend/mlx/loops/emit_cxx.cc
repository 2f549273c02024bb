#include "backend/mlx/loops/emit_cxx.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>


namespace pjrtx::backend::loops {

namespace {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::Plan;
using compiler::Region;
using compiler::Shape;
using compiler::TensorType;
using compiler::ValueId;

// Thrown inside the emitter when the loop holds something it does not take;
// emit_loop turns it into `why`.
struct Unsupported {
  std::string why;
};

[[noreturn]] void unsupported(const Instruction& inst, const std::string& what = "") {
  throw Unsupported{inst.where() + (what.empty() ? "" : ": " + what)};
}

// The CHLO ops jaxlib 0.8.0 to 0.9.0 send as custom_call @mhlo.<op>
// (ops/mhlo_chlo.cc): the C++ function each calls on a real float, or
// nullptr for any other target.
const char* mhlo_chlo_function(const Instruction& inst) {
  if (inst.op != Opcode::custom_call) return nullptr;
  const std::string t = inst.attr_str("call_target_name", "");
  if (t == "mhlo.erf") return "std::erf";
  if (t == "mhlo.acos") return "std::acos";
  if (t == "mhlo.asin") return "std::asin";
  if (t == "mhlo.acosh") return "std::acosh";
  if (t == "mhlo.atanh") return "std::atanh";
  if (t == "mhlo.sinh") return "std::sinh";
  if (t == "mhlo.cosh") return "std::cosh";
  return nullptr;
}

const char* ctype(DType t) {
  switch (t) {
    case DType::kPred: return "bool";
    case DType::kS8: return "int8_t";
    case DType::kS16: return "int16_t";
    case DType::kS32: return "int32_t";
    case DType::kS64: return "int64_t";
    case DType::kU8: return "uint8_t";
    case DType::kU16: return "uint16_t";
    case DType::kU32: return "uint32_t";
    case DType::kU64: return "uint64_t";
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    default: return nullptr;
  }
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// "c0 + i0 * s0 + i1 * s1" with zero terms left out.
std::string affine(int64_t base, const std::vector<std::pair<std::string, int64_t>>& terms) {
  std::string s;
  for (const auto& [v, k] : terms) {
    if (k == 0) continue;
    if (!s.empty()) s += " + ";
    s += k == 1 ? v : v + " * " + std::to_string(k) + "L";
  }
  if (base != 0 || s.empty()) s = s.empty() ? std::to_string(base) + "L" : std::to_string(base) + "L + " + s;
  return s;
}

// A literal of type t from `bytes` (one element).
std::string literal(DType t, const uint8_t* p) {
  char buf[64];
  switch (t) {
    case DType::kPred: return *p ? "true" : "false";
    case DType::kF32: {
      uint32_t u;
      std::memcpy(&u, p, 4);
      std::snprintf(buf, sizeof buf, "F(0x%08xu)", u);
      return buf;
    }
    case DType::kF64: {
      uint64_t u;
      std::memcpy(&u, p, 8);
      std::snprintf(buf, sizeof buf, "D(0x%016llxull)", static_cast<unsigned long long>(u));
      return buf;
    }
    default: {
      uint64_t u = 0;
      std::memcpy(&u, p, compiler::dtype_size(t));  // little-endian hosts only
      std::snprintf(buf, sizeof buf, "static_cast<%s>(0x%llxull)", ctype(t),
                    static_cast<unsigned long long>(u));
      return buf;
    }
  }
}

class Emitter {
 public:
  explicit Emitter(const Plan& plan) : plan_(plan) {}

  LoopSource run(const Instruction& loop) {
    check_tree(loop);
    count_calls(loop);
    // Values read inside the loop but defined outside it: inputs after the
    // operands.
    std::set<ValueId> defined, read;
    collect(loop, defined, read, /*top=*/true);
    LoopSource src;
    for (ValueId v : read)
      if (!defined.count(v)) src.captured.push_back(v);
    src.symbol = "pjrtx_host_loop";
    std::ostringstream body;
    out_ = &body;
    indent_ = 1;
    size_t k = 0;
    std::vector<std::string> ops;
    for (ValueId v : loop.operands) {
      std::string n = "in" + std::to_string(k);
      line("const C<" + elem(v) + "> " + n + "{static_cast<const " + elem(v) + "*>(in[" +
           std::to_string(k) + "])};");
      ops.push_back(n);
      ++k;
    }
    for (ValueId v : src.captured) {
      std::string n = "v" + std::to_string(v);
      line("const C<" + elem(v) + "> " + n + "{static_cast<const " + elem(v) + "*>(in[" +
           std::to_string(k) + "])};");
      names_[v] = n;
      ++k;
    }
    // The entry's operands are input views: the state starts as copies.
    std::vector<std::string> states = emit_while(loop, ops, std::vector<bool>(ops.size(), false));
    for (size_t i = 0; i < states.size(); ++i) {
      int64_t bytes = plan_.type(loop.results[i]).byte_size();
      if (bytes) line("std::memcpy(out[" + std::to_string(i) + "], " + states[i] + ".d, " + std::to_string(bytes) + ");");
    }
    std::ostringstream tu;
    for (const std::string& def : fn_defs_) tu << def << "\n";
    tu << "extern \"C\" int " << src.symbol
       << "(const void* const* in, void* const* out) {\n  try {\n"
       << body.str() << "  } catch (...) {\n    return 1;\n  }\n  return 0;\n}\n";
    src.code = tu.str();
    src.work = work_;
    src.ops = ops_;
    return src;
  }

 private:
  const Plan& plan_;
  std::ostringstream* out_ = nullptr;
  int indent_ = 0;
  int fresh_ = 0;
  int64_t work_ = 0, ops_ = 0;
  // The C++ expression (a buffer with .d) of each value in scope.
  std::map<ValueId, std::string> names_;
  // Values whose buffer an op may take over at their last use: values the
  // current region defines, and the body's own state.
  std::set<std::string> movable_;
  // Names of the values the instruction being emitted reads for the last
  // time from inside its case/if branches (emit_region sets it).
  std::set<std::string> dying_;
  // Call sites of each callee in the loop tree (callees' bodies included);
  // a big callee with several becomes one C++ function (emit_call).
  std::map<std::string, int> call_sites_;
  // Instructions in each callee, nested regions and callees included.
  std::map<std::string, int64_t> callee_ops_;
  struct Outlined {
    std::string fn;
    int64_t work = 0, ops = 0;
  };
  std::map<std::string, Outlined> outlined_;
  // Definitions of the outlined callees, each after those it calls.
  std::vector<std::string> fn_defs_;

  // ---- checks and analysis ------------------------------------------------

  const TensorType& type(ValueId v) const { return plan_.type(v); }
  std::string elem(ValueId v) const { return ctype(type(v).dtype); }
  int64_t count(ValueId v) const { return type(v).num_elements(); }
  std::string n_of(ValueId v) const { return std::to_string(count(v)) + "L"; }
  // V<T, N> for values up to 256 bytes, else B<T, N>.
  std::string buf_type(ValueId v) const {
    const TensorType& t = type(v);
    return std::string(t.byte_size() <= 256 ? "V<" : "B<") + ctype(t.dtype) + ", " +
           std::to_string(t.num_elements()) + ">";
  }

  // Every op, type and callee in the loop, before any code: the first thing
  // the engine lacks is the answer.
  void check_tree(const Instruction& inst, int depth = 0) {
    if (depth > 64) unsupported(inst, "nesting deeper than 64");
    for (ValueId v : inst.operands)
      if (!ctype(type(v).dtype)) unsupported(inst, "element type " + type(v).str());
    for (ValueId v : inst.results)
      if (!ctype(type(v).dtype)) unsupported(inst, "element type " + type(v).str());
    if (!supported_op(inst.op) && !mhlo_chlo_function(inst)) unsupported(inst);
    for (const Region& r : inst.regions) {
      for (ValueId p : r.params)
        if (!ctype(type(p).dtype)) unsupported(inst, "region parameter type " + type(p).str());
      for (const Instruction& i : r.body) check_tree(i, depth + 1);
    }
    if (inst.op == Opcode::call) {
      const compiler::Function* f = plan_.find_function(inst.attr_str("callee"));
      if (!f) unsupported(inst, "unknown callee");
      for (const Instruction& i : f->body.body) check_tree(i, depth + 1);
    }
  }

  static bool supported_op(Opcode op) {
    switch (op) {
      case Opcode::abs: case Opcode::add: case Opcode::and_: case Opcode::atan2:
      case Opcode::bitcast_convert: case Opcode::broadcast_in_dim: case Opcode::case_:
      case Opcode::cbrt: case Opcode::ceil: case Opcode::clamp: case Opcode::compare:
      case Opcode::concatenate: case Opcode::constant: case Opcode::convert: case Opcode::cosine:
      case Opcode::count_leading_zeros: case Opcode::divide: case Opcode::dot:
      case Opcode::dot_general: case Opcode::dynamic_slice: case Opcode::dynamic_update_slice:
      case Opcode::exponential: case Opcode::exponential_minus_one: case Opcode::floor:
      case Opcode::gather: case Opcode::if_: case Opcode::iota: case Opcode::is_finite:
      case Opcode::log: case Opcode::log_plus_one: case Opcode::logistic: case Opcode::maximum:
      case Opcode::minimum: case Opcode::multiply: case Opcode::negate: case Opcode::not_:
      case Opcode::optimization_barrier: case Opcode::or_: case Opcode::pad: case Opcode::popcnt:
      case Opcode::power: case Opcode::reduce: case Opcode::remainder: case Opcode::reshape:
      case Opcode::reverse: case Opcode::round_nearest_afz: case Opcode::round_nearest_even:
      case Opcode::rsqrt: case Opcode::scatter: case Opcode::select: case Opcode::shift_left:
      case Opcode::shift_right_arithmetic: case Opcode::shift_right_logical: case Opcode::sign:
      case Opcode::sine: case Opcode::slice: case Opcode::sort: case Opcode::sqrt:
      case Opcode::subtract: case Opcode::tan: case Opcode::tanh: case Opcode::transpose:
      case Opcode::while_: case Opcode::xor_: case Opcode::call:
        return true;
      default:
        return false;
    }
  }

  void count_calls(const Instruction& inst) {
    for (const Region& r : inst.regions)
      for (const Instruction& i : r.body) count_calls(i);
    if (inst.op == Opcode::call) {
      const std::string callee = inst.attr_str("callee");
      if (call_sites_[callee]++ == 0)
        for (const Instruction& i : plan_.find_function(callee)->body.body) count_calls(i);
    }
  }

  // Values defined and read anywhere inside inst's regions (and callees).
  void collect(const Instruction& inst, std::set<ValueId>& defined, std::set<ValueId>& read,
               bool top) {
    if (!top) {
      for (ValueId v : inst.operands) read.insert(v);
      for (ValueId v : inst.results) defined.insert(v);
    }
    for (const Region& r : inst.regions) {
      for (ValueId p : r.params) defined.insert(p);
      for (const Instruction& i : r.body) collect(i, defined, read, false);
      for (ValueId v : r.returns) read.insert(v);
    }
  }

  // The values an instruction reads from its enclosing scope: operands and
  // what its regions capture.
  void reads_of(const Instruction& inst, std::set<ValueId>& out) {
    std::set<ValueId> defined, read;
    collect(inst, defined, read, true);
    for (ValueId v : inst.operands) out.insert(v);
    for (ValueId v : read)
      if (!defined.count(v)) out.insert(v);
  }

  // ---- output -------------------------------------------------------------

  void line(const std::string& s) { *out_ << std::string(2 * indent_, ' ') << s << "\n"; }
  std::string fresh(const char* p) { return p + std::to_string(fresh_++); }
  std::string name(ValueId v) const {
    auto it = names_.find(v);
    if (it == names_.end()) throw Unsupported{"value %" + std::to_string(v) + " read before it is defined"};
    return it->second;
  }
  // Declares the buffer of result v and binds it. `empty`: a heap buffer
  // without storage yet, for a result that is assigned whole (assign()).
  std::string decl(ValueId v, bool empty = false) {
    std::string n = "v" + std::to_string(v);
    const bool heap = type(v).byte_size() > 256;
    line(buf_type(v) + " " + n + (empty && heap ? "{nullptr};" : ";"));
    names_[v] = n;
    movable_.insert(n);
    return n;
  }
  // Nested loops over `shape` (i0, i1, ...); body gets the index names.
  void loops(const Shape& shape, const std::function<void(const std::vector<std::string>&)>& body) {
    std::vector<std::string> iv;
    int opened = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      std::string i = fresh("i");
      iv.push_back(i);
      line("for (long " + i + " = 0; " + i + " < " + std::to_string(shape[d]) + "L; ++" + i + ") {");
      ++indent_;
      ++opened;
    }
    body(iv);
    for (int k = 0; k < opened; ++k) {
      --indent_;
      line("}");
    }
  }
  std::string flat(const Shape& shape, const std::vector<std::string>& iv) {
    auto st = strides_of(shape);
    std::vector<std::pair<std::string, int64_t>> t;
    for (size_t d = 0; d < iv.size(); ++d) t.push_back({iv[d], st[d]});
    return affine(0, t);
  }

  // ---- regions --------------------------------------------------------------

  // Emits a region's instructions with its params bound to `args` (their
  // buffers; `args_movable` says which an op may consume), and returns the
  // names of its returns. The caller opens and closes the C++ scope.
  std::vector<std::string> emit_region(const Region& r, const std::vector<std::string>& args,
                                       const std::vector<bool>& args_movable,
                                       const std::set<std::string>& outer_movable = {}) {
    if (args.size() != r.params.size()) throw Unsupported{"region arity"};
    // Nothing from the enclosing scope may be consumed here (a region can
    // run many times: a loop body, a reduction's body; and the enclosing
    // scope may read its values after it), but for `outer_movable`: what a
    // case or if branch may take over because nothing reads it after the
    // branch. The caller restores the set.
    movable_ = outer_movable;
    for (size_t i = 0; i < args.size(); ++i) {
      names_[r.params[i]] = args[i];
      if (args_movable[i]) movable_.insert(args[i]);
    }
    // Last use of each value inside this region (index into body; returns
    // count as body.size()).
    std::map<ValueId, size_t> last;
    for (size_t i = 0; i < r.body.size(); ++i) {
      std::set<ValueId> rd;
      reads_of(r.body[i], rd);
      for (ValueId v : rd) last[v] = i;
    }
    for (ValueId v : r.returns) last[v] = r.body.size();
    for (size_t i = 0; i < r.body.size(); ++i) {
      const Instruction& inst = r.body[i];
      // Operands this instruction may consume: at their last use, named once.
      std::vector<bool> consume(inst.operands.size(), false);
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        ValueId v = inst.operands[k];
        auto it = last.find(v);
        bool once = std::count(inst.operands.begin(), inst.operands.end(), v) == 1;
        consume[k] = once && it != last.end() && it->second == i && names_.count(v) &&
                     movable_.count(names_[v]);
      }
      // Values this instruction's branches read for the last time.
      dying_.clear();
      if (inst.op == Opcode::case_ || inst.op == Opcode::if_) {
        std::set<ValueId> rd;
        reads_of(inst, rd);
        for (ValueId v : rd) {
          auto it = last.find(v);
          if (it != last.end() && it->second == i && names_.count(v) && movable_.count(names_[v]) &&
              !std::count(inst.operands.begin(), inst.operands.end(), v))
            dying_.insert(names_[v]);
        }
      }
      emit(inst, consume);
    }
    std::vector<std::string> rets;
    for (ValueId v : r.returns) rets.push_back(name(v));
    return rets;
  }

  // Runs `r` on scalar arguments (a reduce, sort or scatter body): each
  // param gets a V<T, 1> holding its expression; returns the element
  // expressions of the returns.
  std::vector<std::string> emit_scalar_region(const Region& r, const std::vector<std::string>& exprs) {
    // The region's values stay in this C++ scope for the returned
    // expressions; only the bindings are restored afterwards.
    const auto saved_names = names_;
    const auto saved_mov = movable_;
    std::vector<std::string> args;
    for (size_t i = 0; i < r.params.size(); ++i) {
      std::string a = fresh("p");
      line("V<" + elem(r.params[i]) + ", 1> " + a + "{{" + exprs[i] + "}};");
      args.push_back(a);
    }
    auto rets = emit_region(r, args, std::vector<bool>(args.size(), false));
    for (auto& s : rets) s += ".d[0]";
    names_ = saved_names;
    movable_ = saved_mov;
    return rets;
  }

  // res[j].d[at] = body(res[j].d[at]..., updates...) for a reduce or scatter
  // body; every accumulator reads the old values before any is written.
  void combine_into(const Region& body, const std::vector<std::string>& res, const std::string& at,
                    const std::vector<std::string>& updates) {
    std::vector<std::string> args;
    for (const auto& r : res) args.push_back(r + ".d[" + at + "]");
    args.insert(args.end(), updates.begin(), updates.end());
    auto rets = emit_scalar_region(body, args);
    std::vector<std::string> tmp;
    for (size_t j = 0; j < res.size(); ++j) {
      std::string x = fresh("x");
      line("const auto " + x + " = " + rets[j] + ";");
      tmp.push_back(x);
    }
    for (size_t j = 0; j < res.size(); ++j) line(res[j] + ".d[" + at + "] = " + tmp[j] + ";");
  }

  // `dst = src` for two buffers of value v's type (moved when allowed).
  void assign(const std::string& dst, const std::string& src, ValueId v, bool move) {
    if (move) {
      line(dst + " = std::move(" + src + ");");
    } else {
      work_ += count(v);
      line("copy_into(" + dst + ", " + src + ", " + n_of(v) + ");");
    }
  }

  // ---- control flow -----------------------------------------------------------

  // A while loop whose state starts as `init` (buffer names; init_move says
  // which may be taken over). Returns the state buffers, the loop's results.
  std::vector<std::string> emit_while(const Instruction& inst, const std::vector<std::string>& init,
                                      const std::vector<bool>& init_move) {
    const Region& cond = inst.regions.at(0);
    const Region& body = inst.regions.at(1);
    std::vector<std::string> st;
    for (size_t i = 0; i < init.size(); ++i) {
      ValueId v = inst.results.at(i);
      std::string s = fresh("s");
      if (init_move[i]) line(buf_type(v) + " " + s + "(std::move(" + init[i] + "));");
      else line(buf_type(v) + " " + s + " = copy_as<" + buf_type(v) + ">(" + init[i] + ", " + n_of(v) + ");");
      st.push_back(s);
    }
    line("for (;;) {");
    ++indent_;
    std::string go = fresh("go");
    line("bool " + go + ";");
    line("{");
    ++indent_;
    auto saved = movable_;
    auto c = emit_region(cond, st, std::vector<bool>(st.size(), false));
    line(go + " = " + c.at(0) + ".d[0];");
    movable_ = saved;
    --indent_;
    line("}");
    line("if (!" + go + ") break;");
    line("{");
    ++indent_;
    auto rets = emit_region(body, st, std::vector<bool>(st.size(), true));
    // New state: returns that are this iteration's values move in; those
    // that are state buffers (or returned twice) are copied first.
    std::map<std::string, int> uses;
    for (auto& r : rets) ++uses[r];
    std::vector<std::pair<size_t, std::string>> temps;
    for (size_t i = 0; i < rets.size(); ++i) {
      if (rets[i] == st[i]) continue;
      bool is_state = std::find(st.begin(), st.end(), rets[i]) != st.end();
      if (is_state || uses[rets[i]] > 1 || !movable_.count(rets[i])) {
        std::string t = fresh("t");
        ValueId v = inst.results[i];
        work_ += count(v);
        line(buf_type(v) + " " + t + " = copy_as<" + buf_type(v) + ">(" + rets[i] + ", " + n_of(v) + ");");
        temps.push_back({i, t});
      }
    }
    for (size_t i = 0; i < rets.size(); ++i) {
      if (rets[i] == st[i]) continue;
      bool temp = std::any_of(temps.begin(), temps.end(), [&](auto& p) { return p.first == i; });
      if (!temp) line(st[i] + " = std::move(" + rets[i] + ");");
    }
    for (auto& [i, t] : temps) line(st[i] + " = std::move(" + t + ");");
    movable_ = saved;
    --indent_;
    line("}");
    --indent_;
    line("}");
    return st;
  }

  // Results declared here, then each branch in its own scope assigns them.
  void emit_branches(const Instruction& inst, const std::string& selector) {
    const std::set<std::string> dying = dying_;
    std::vector<std::string> res;
    for (ValueId v : inst.results) res.push_back(decl(v, /*empty=*/true));
    auto saved_names = names_;
    auto saved_mov = movable_;
    for (size_t b = 0; b < inst.regions.size(); ++b) {
      std::string cond;
      if (inst.op == Opcode::if_) cond = b == 0 ? "if (" + selector + ") {" : "} else {";
      else if (b + 1 == inst.regions.size()) cond = b == 0 ? "{" : "} else {";
      else cond = std::string(b == 0 ? "if (" : "} else if (") + selector + " == " + std::to_string(b) + "L) {";
      line(cond);
      ++indent_;
      // Exactly one branch runs: each may take over what dies here.
      auto rets = emit_region(inst.regions[b], {}, {}, dying);
      std::map<std::string, int> uses;
      for (auto& r : rets) ++uses[r];
      for (size_t i = 0; i < rets.size(); ++i)
        assign(res[i], rets[i], inst.results[i], movable_.count(rets[i]) && uses[rets[i]] == 1);
      --indent_;
      names_ = saved_names;
      movable_ = saved_mov;
    }
    line("}");
  }

  // A callee called from one place is inlined (its operands may be taken
  // over at their last use); a big one called from several is emitted once
  // as a function over views of its operands, so a body that calls threefry
  // at five places compiles it once. A small one (jnp.remainder's dozen
  // ops) is inlined at every site all the same: there its operands are
  // often constants the C++ compiler folds in (x % 4096 becomes a mask, not
  // an integer division), which a shared function hides from it.
  static constexpr int64_t kOutlineOps = 48;

  int64_t ops_in(const compiler::Region& r) {
    int64_t n = 0;
    for (const Instruction& i : r.body) {
      ++n;
      for (const compiler::Region& sub : i.regions) n += ops_in(sub);
      if (i.op == Opcode::call) n += callee_ops(i.attr_str("callee"));
    }
    return n;
  }

  int64_t callee_ops(const std::string& callee) {
    auto it = callee_ops_.find(callee);
    if (it != callee_ops_.end()) return it->second;
    callee_ops_[callee] = 0;  // a recursive call counts nothing (check_tree refuses it)
    const int64_t n = ops_in(plan_.find_function(callee)->body);
    callee_ops_[callee] = n;
    return n;
  }

  void emit_call(const Instruction& inst, const std::vector<bool>& consume) {
    const std::string callee = inst.attr_str("callee");
    if (call_sites_[callee] > 1 && callee_ops(callee) > kOutlineOps)
      return emit_outlined_call(inst, callee);
    const compiler::Function* f = plan_.find_function(callee);
    std::vector<std::string> res;
    for (ValueId v : inst.results) res.push_back(decl(v, /*empty=*/true));
    auto saved_names = names_;
    auto saved_mov = movable_;
    line("{");
    ++indent_;
    std::vector<std::string> args;
    for (ValueId v : inst.operands) args.push_back(name(v));
    auto rets = emit_region(f->body, args, consume);
    std::map<std::string, int> uses;
    for (auto& r : rets) ++uses[r];
    for (size_t i = 0; i < rets.size(); ++i)
      assign(res[i], rets[i], inst.results[i], movable_.count(rets[i]) && uses[rets[i]] == 1);
    --indent_;
    line("}");
    names_ = saved_names;
    movable_ = saved_mov;
    // The consumed operands are gone now.
    for (size_t k = 0; k < consume.size(); ++k)
      if (consume[k]) movable_.erase(name(inst.operands[k]));
  }

  void emit_outlined_call(const Instruction& inst, const std::string& callee) {
    const Outlined& o = outline(callee);
    std::vector<std::string> args;
    for (ValueId v : inst.operands) args.push_back("C<" + elem(v) + ">{" + name(v) + ".d}");
    for (ValueId v : inst.results) args.push_back(decl(v, /*empty=*/true));
    std::string call = o.fn + "(";
    for (size_t i = 0; i < args.size(); ++i) call += (i ? ", " : "") + args[i];
    line(call + ");");
    work_ += o.work;
    ops_ += o.ops;
  }

  // The C++ function for `callee`: its params are views, its results are
  // written to the caller's buffers. Emitted on first use, in a scope of its
  // own (a function reads nothing but its params).
  const Outlined& outline(const std::string& callee) {
    auto it = outlined_.find(callee);
    if (it != outlined_.end()) {
      if (it->second.fn.empty()) throw Unsupported{"recursive call of @" + callee};
      return it->second;
    }
    outlined_[callee];  // marks it in progress
    const compiler::Function* f = plan_.find_function(callee);
    const Region& r = f->body;
    const std::string fn = "fn" + std::to_string(outlined_.size()) + "_" + sanitize(callee);
    auto saved_names = names_;
    auto saved_mov = movable_;
    auto saved_dying = dying_;
    std::ostringstream* saved_out = out_;
    const int saved_indent = indent_;
    const int64_t work0 = work_, ops0 = ops_;
    std::ostringstream body;
    out_ = &body;
    indent_ = 1;
    names_.clear();
    std::string sig = "static void " + fn + "(";
    std::vector<std::string> params;
    for (size_t i = 0; i < r.params.size(); ++i) {
      params.push_back("a" + std::to_string(i));
      sig += (i ? ", " : "") + std::string("const C<") + elem(r.params[i]) + "> " + params.back();
    }
    for (size_t i = 0; i < r.returns.size(); ++i) {
      sig += (i || !r.params.empty() ? ", " : "") + buf_type(r.returns[i]) + "& r" + std::to_string(i);
    }
    auto rets = emit_region(r, params, std::vector<bool>(params.size(), false));
    std::map<std::string, int> uses;
    for (auto& x : rets) ++uses[x];
    for (size_t i = 0; i < rets.size(); ++i)
      assign("r" + std::to_string(i), rets[i], r.returns[i], movable_.count(rets[i]) && uses[rets[i]] == 1);
    fn_defs_.push_back(sig + ") {\n" + body.str() + "}\n");
    Outlined& o = outlined_[callee];
    o.fn = fn;
    o.work = work_ - work0;
    o.ops = ops_ - ops0;
    work_ = work0;
    ops_ = ops0;
    out_ = saved_out;
    indent_ = saved_indent;
    names_ = saved_names;
    movable_ = saved_mov;
    dying_ = saved_dying;
    return o;
  }

  static std::string sanitize(const std::string& s) {
    std::string o;
    for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return o.substr(0, 40);
  }

  // ---- one instruction -------------------------------------------------------

  void emit(const Instruction& inst, const std::vector<bool>& consume) {
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
      line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = " + f + "(" +
           el(0, "k") + ");");
    };
    auto binary = [&](const std::string& f) {
      std::string r = decl(inst.results[0]);
      line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = " + f + "<" + T +
           ">(" + el(0, "k") + ", " + el(1, "k") + ");");
    };
    const bool flt = !T.empty() && (T == "float" || T == "double");
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
      case Opcode::sqrt: return float_only("std::sqrt");
      case Opcode::rsqrt: return float_only("h_rsqrt");
      case Opcode::cbrt: return float_only("std::cbrt");
      case Opcode::exponential: return float_only("std::exp");
      case Opcode::exponential_minus_one: return float_only("std::expm1");
      case Opcode::log: return float_only("std::log");
      case Opcode::log_plus_one: return float_only("std::log1p");
      case Opcode::logistic: return float_only("h_logistic");
      case Opcode::sine: return float_only("std::sin");
      case Opcode::cosine: return float_only("std::cos");
      case Opcode::tan: return float_only("std::tan");
      case Opcode::tanh: return float_only("std::tanh");
      case Opcode::custom_call:
        if (const char* f = mhlo_chlo_function(inst)) return float_only(f);
        unsupported(inst);
      case Opcode::floor: return float_only("std::floor");
      case Opcode::ceil: return float_only("std::ceil");
      case Opcode::round_nearest_even: return float_only("h_rne");
      case Opcode::round_nearest_afz: return float_only("h_afz");
      case Opcode::is_finite: {
        std::string r = decl(inst.results[0]);
        line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = h_isfinite(" +
             el(0, "k") + ");");
        return;
      }
      case Opcode::convert: {
        std::string r = decl(inst.results[0]);
        line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = cv<" + T + ", " +
             elem(inst.operands[0]) + ">(" + el(0, "k") + ");");
        return;
      }
      case Opcode::bitcast_convert: {
        if (type(inst.operands[0]).shape != type(inst.results[0]).shape ||
            compiler::dtype_size(type(inst.operands[0]).dtype) != compiler::dtype_size(type(inst.results[0]).dtype) ||
            type(inst.results[0]).dtype == DType::kPred || type(inst.operands[0]).dtype == DType::kPred)
          unsupported(inst, "between widths");
        std::string r = decl(inst.results[0]);
        line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = bitcast<" + T + ", " +
             elem(inst.operands[0]) + ">(" + el(0, "k") + ");");
        return;
      }
      case Opcode::compare: return emit_compare(inst, el);
      case Opcode::select: {
        std::string r = decl(inst.results[0]);
        line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = " + el(0, "k") +
             " ? " + el(1, "k") + " : " + el(2, "k") + ";");
        return;
      }
      case Opcode::clamp: {
        std::string r = decl(inst.results[0]);
        line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = h_min<" + T +
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
          std::string n = "v" + std::to_string(v);
          if (consume[k] && buf_type(v) == buf_type(inst.operands[k]))
            line(buf_type(v) + " " + n + "(std::move(" + in(k) + "));");
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
  std::string take_or_copy(ValueId result, ValueId operand, bool consume) {
    std::string n = "v" + std::to_string(result);
    if (consume && buf_type(result) == buf_type(operand)) {
      line(buf_type(result) + " " + n + "(std::move(" + name(operand) + "));");
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
  void emit_compare(const Instruction& inst, const El& el) {
    const std::string& d = inst.attr_str("comparison_direction");
    std::string op = d == "EQ" ? "==" : d == "NE" ? "!=" : d == "LT" ? "<" : d == "LE" ? "<=" : d == "GT" ? ">" : d == "GE" ? ">=" : "";
    if (op.empty()) unsupported(inst, "comparison_direction " + d);
    DType t = type(inst.operands[0]).dtype;
    std::string ct = inst.attr_str("compare_type", "");
    bool total = ct == "TOTALORDER";
    if (ct == "SIGNED" && !compiler::is_signed_int(t)) unsupported(inst, "SIGNED compare of " + type(inst.operands[0]).str());
    if (ct == "UNSIGNED" && !(compiler::is_unsigned_int(t) || t == DType::kPred))
      unsupported(inst, "UNSIGNED compare of " + type(inst.operands[0]).str());
    if ((ct == "FLOAT" || total) && !compiler::is_float(t)) unsupported(inst, ct + " compare of integers");
    std::string r = decl(inst.results[0]);
    std::string a = el(0, "k"), b = el(1, "k");
    if (total) {
      a = "h_tot(" + a + ")";
      b = "h_tot(" + b + ")";
    }
    line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = " + a + " " + op + " " + b + ";");
  }

  void emit_constant(const Instruction& inst) {
    const compiler::DenseData& dd = inst.attr_dense("value");
    ValueId v = inst.results[0];
    DType t = type(v).dtype;
    int64_t n = count(v);
    int64_t es = compiler::dtype_size(t);
    if (dd.splat || n <= 1) {
      std::string r = decl(v);
      if (n > 0) {
        if (dd.bytes.size() < static_cast<size_t>(es)) unsupported(inst, "constant bytes");
        line("for (long k = 0; k < " + n_of(v) + "; ++k) " + r + ".d[k] = " + literal(t, dd.bytes.data()) + ";");
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
    std::string nm = "v" + std::to_string(v);
    line("const C<" + std::string(ctype(t)) + "> " + nm + "{" + arr + "};");
    names_[v] = nm;
  }

  void emit_pad(const Instruction& inst) {
    const Shape& is = type(inst.operands[0]).shape;
    const Shape& os = type(inst.results[0]).shape;
    auto lo = inst.attr_ints("edge_padding_low");
    auto interior = inst.attr_ints("interior_padding");
    auto ost = strides_of(os);
    std::string r = decl(inst.results[0]);
    line("for (long k = 0; k < " + n_of(inst.results[0]) + "; ++k) " + r + ".d[k] = " + name(inst.operands[1]) + ".d[0];");
    loops(is, [&](const std::vector<std::string>& iv) {
      std::string cond, dst;
      for (size_t j = 0; j < is.size(); ++j) {
        std::string p = fresh("q");
        line("const long " + p + " = " + std::to_string(lo[j]) + "L + " + iv[j] + " * " +
             std::to_string(interior[j] + 1) + "L;");
        cond += (cond.empty() ? "" : " && ") + p + " >= 0 && " + p + " < " + std::to_string(os[j]) + "L";
        dst += p + " * " + std::to_string(ost[j]) + "L + ";
      }
      line("if (" + (cond.empty() ? std::string("true") : cond) + ") " + r + ".d[" + dst + "0L] = " +
           name(inst.operands[0]) + ".d[" + flat(is, iv) + "];");
    });
  }

  void emit_dot(const Instruction& inst) {
    const Shape& ls = type(inst.operands[0]).shape;
    const Shape& rs = type(inst.operands[1]).shape;
    std::vector<int64_t> lb, rb, lc, rc;
    if (inst.op == Opcode::dot) {
      if (ls.size() > 2 || rs.size() > 2 || ls.empty() || rs.empty()) unsupported(inst, "dot of these ranks");
      lc = {static_cast<int64_t>(ls.size()) - 1};
      rc = {0};
    } else {
      lb = inst.attr_ints("dot_dimension_numbers.lhs_batching_dimensions", {});
      rb = inst.attr_ints("dot_dimension_numbers.rhs_batching_dimensions", {});
      lc = inst.attr_ints("dot_dimension_numbers.lhs_contracting_dimensions", {});
      rc = inst.attr_ints("dot_dimension_numbers.rhs_contracting_dimensions", {});
    }
    auto free_dims = [](size_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
      std::vector<int64_t> f;
      for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
        if (!std::count(a.begin(), a.end(), d) && !std::count(b.begin(), b.end(), d)) f.push_back(d);
      return f;
    };
    auto lf = free_dims(ls.size(), lb, lc), rf = free_dims(rs.size(), rb, rc);
    const Shape& os = type(inst.results[0]).shape;
    if (os.size() != lb.size() + lf.size() + rf.size()) unsupported(inst, "result rank");
    Shape cs;
    for (int64_t d : lc) cs.push_back(ls.at(d));
    int64_t k_total = 1;
    for (int64_t c : cs) k_total *= c;
    work_ += std::max<int64_t>(count(inst.results[0]), 1) * k_total;
    auto lst = strides_of(ls), rst = strides_of(rs);
    const std::string T = elem(inst.results[0]);
    std::string r = decl(inst.results[0]);
    loops(os, [&](const std::vector<std::string>& iv) {
      std::vector<std::pair<std::string, int64_t>> lt, rt;
      size_t o = 0;
      for (size_t j = 0; j < lb.size(); ++j, ++o) {
        lt.push_back({iv[o], lst[lb[j]]});
        rt.push_back({iv[o], rst[rb[j]]});
      }
      for (int64_t d : lf) lt.push_back({iv[o++], lst[d]});
      for (int64_t d : rf) rt.push_back({iv[o++], rst[d]});
      std::string acc = fresh("acc");
      line(T + " " + acc + " = " + T + "(0);");
      loops(cs, [&](const std::vector<std::string>& kv) {
        auto l2 = lt, r2 = rt;
        for (size_t j = 0; j < lc.size(); ++j) {
          l2.push_back({kv[j], lst[lc[j]]});
          r2.push_back({kv[j], rst[rc[j]]});
        }
        line(acc + " = h_add<" + T + ">(" + acc + ", h_mul<" + T + ">(cv<" + T + ", " + elem(inst.operands[0]) +
             ">(" + name(inst.operands[0]) + ".d[" + affine(0, l2) + "]), cv<" + T + ", " + elem(inst.operands[1]) +
             ">(" + name(inst.operands[1]) + ".d[" + affine(0, r2) + "])));");
      });
      line(r + ".d[" + flat(os, iv) + "] = " + acc + ";");
    });
  }

  void emit_reduce(const Instruction& inst) {
    size_t n = inst.results.size();
    if (inst.operands.size() != 2 * n) unsupported(inst, "operand count");
    const Shape& is = type(inst.operands[0]).shape;
    auto dims = inst.attr_ints("dimensions");
    const Shape& os = type(inst.results[0]).shape;
    auto ost = strides_of(os);
    work_ += count(inst.operands[0]);
    std::vector<std::string> res;
    for (size_t j = 0; j < n; ++j) {
      res.push_back(decl(inst.results[j]));
      line("for (long k = 0; k < " + n_of(inst.results[j]) + "; ++k) " + res[j] + ".d[k] = " +
           name(inst.operands[n + j]) + ".d[0];");
    }
    loops(is, [&](const std::vector<std::string>& iv) {
      std::vector<std::pair<std::string, int64_t>> t;
      size_t o = 0;
      for (size_t d = 0; d < is.size(); ++d)
        if (!std::count(dims.begin(), dims.end(), static_cast<int64_t>(d))) t.push_back({iv[d], ost[o++]});
      std::string oi = fresh("o");
      line("const long " + oi + " = " + affine(0, t) + ";");
      std::string ii = flat(is, iv);
      std::vector<std::string> xs;
      for (size_t j = 0; j < n; ++j) xs.push_back(name(inst.operands[j]) + ".d[" + ii + "]");
      line("{");
      ++indent_;
      combine_into(inst.regions.at(0), res, oi, xs);
      --indent_;
      line("}");
    });
  }

  // Start index of operand dim `d` for the batch position `bv` (names of
  // the loop variables over the index tensor's non-vector dims), clamped
  // by the caller.
  struct IndexSpec {
    ValueId indices;
    int64_t index_vector_dim;
    std::vector<int64_t> start_index_map;  // index k -> operand dim
    std::vector<int64_t> operand_batching, indices_batching;
  };

  // Emits `const long <names>[d]` for every operand dim d: the start index
  // (0 where no index names d) from the index tensor at batch coordinates
  // `bv` (one per index dim but index_vector_dim, in order).
  std::vector<std::string> start_indices(const IndexSpec& s, size_t operand_rank,
                                         const std::vector<std::string>& bv) {
    const Shape& xs = type(s.indices).shape;
    auto xst = strides_of(xs);
    std::vector<std::string> start(operand_rank, "0L");
    // Index tensor coordinate of each of its dims but the vector dim.
    std::vector<std::string> coord(xs.size(), "");
    size_t b = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      if (static_cast<int64_t>(d) != s.index_vector_dim) coord[d] = bv.at(b++);
    for (size_t k = 0; k < s.start_index_map.size(); ++k) {
      std::vector<std::pair<std::string, int64_t>> t;
      int64_t base = 0;
      for (size_t d = 0; d < xs.size(); ++d) {
        if (static_cast<int64_t>(d) == s.index_vector_dim) base += static_cast<int64_t>(k) * xst[d];
        else t.push_back({coord[d], xst[d]});
      }
      std::string nm = fresh("ix");
      line("const long " + nm + " = idx(" + name(s.indices) + ".d[" + affine(base, t) + "]);");
      start.at(s.start_index_map[k]) = nm;
    }
    for (size_t j = 0; j < s.operand_batching.size(); ++j) {
      int64_t xd = s.indices_batching[j];
      // The batch coordinate of index dim xd.
      start.at(s.operand_batching[j]) = coord.at(xd);
    }
    return start;
  }

  void emit_gather(const Instruction& inst) {
    const std::string k = "dimension_numbers.";
    IndexSpec s{inst.operands[1], inst.attr_int(k + "index_vector_dim"), inst.attr_ints(k + "start_index_map", {}),
                inst.attr_ints(k + "operand_batching_dims", {}), inst.attr_ints(k + "start_indices_batching_dims", {})};
    auto offset_dims = inst.attr_ints(k + "offset_dims", {});
    auto collapsed = inst.attr_ints(k + "collapsed_slice_dims", {});
    auto sizes = inst.attr_ints("slice_sizes");
    const Shape& is = type(inst.operands[0]).shape;
    const Shape& os = type(inst.results[0]).shape;
    auto ist = strides_of(is);
    // Operand dims that take an offset coordinate, in order.
    std::vector<int64_t> window;
    for (int64_t d = 0; d < static_cast<int64_t>(is.size()); ++d)
      if (!std::count(collapsed.begin(), collapsed.end(), d) &&
          !std::count(s.operand_batching.begin(), s.operand_batching.end(), d))
        window.push_back(d);
    if (window.size() != offset_dims.size()) unsupported(inst, "offset_dims");
    std::string r = decl(inst.results[0]);
    loops(os, [&](const std::vector<std::string>& iv) {
      std::vector<std::string> bv, ov;
      for (size_t d = 0; d < os.size(); ++d) {
        if (std::count(offset_dims.begin(), offset_dims.end(), static_cast<int64_t>(d))) ov.push_back(iv[d]);
        else bv.push_back(iv[d]);
      }
      auto start = start_indices(s, is.size(), bv);
      std::string src;
      size_t w = 0;
      for (size_t d = 0; d < is.size(); ++d) {
        bool batching = std::count(s.operand_batching.begin(), s.operand_batching.end(), static_cast<int64_t>(d));
        std::string c = batching ? start[d]
                                 : "clampi(" + start[d] + ", 0L, " + std::to_string(is[d] - sizes[d]) + "L)";
        if (w < window.size() && window[w] == static_cast<int64_t>(d)) c = "(" + c + " + " + ov[w++] + ")";
        src += c + " * " + std::to_string(ist[d]) + "L + ";
      }
      line(r + ".d[" + flat(os, iv) + "] = " + name(inst.operands[0]) + ".d[" + src + "0L];");
    });
  }

  void emit_scatter(const Instruction& inst, const std::vector<bool>& consume) {
    size_t n = inst.results.size();
    if (inst.operands.size() != 2 * n + 1) unsupported(inst, "operand count");
    const std::string k = "scatter_dimension_numbers.";
    IndexSpec s{inst.operands[n], inst.attr_int(k + "index_vector_dim"),
                inst.attr_ints(k + "scattered_dims_to_operand_dims", {}), inst.attr_ints(k + "input_batching_dims", {}),
                inst.attr_ints(k + "scatter_indices_batching_dims", {})};
    auto window_dims = inst.attr_ints(k + "update_window_dims", {});
    auto inserted = inst.attr_ints(k + "inserted_window_dims", {});
    const Shape& is = type(inst.operands[0]).shape;
    const Shape& us = type(inst.operands[n + 1]).shape;
    auto ist = strides_of(is);
    std::vector<int64_t> window;  // operand dims with a window coordinate
    for (int64_t d = 0; d < static_cast<int64_t>(is.size()); ++d)
      if (!std::count(inserted.begin(), inserted.end(), d) &&
          !std::count(s.operand_batching.begin(), s.operand_batching.end(), d))
        window.push_back(d);
    if (window.size() != window_dims.size()) unsupported(inst, "update_window_dims");
    std::vector<std::string> res;
    for (size_t j = 0; j < n; ++j) res.push_back(take_or_copy(inst.results[j], inst.operands[j], consume[j]));
    work_ += count(inst.operands[n + 1]);
    loops(us, [&](const std::vector<std::string>& iv) {
      std::vector<std::string> bv, wv;
      for (size_t d = 0; d < us.size(); ++d) {
        if (std::count(window_dims.begin(), window_dims.end(), static_cast<int64_t>(d))) wv.push_back(iv[d]);
        else bv.push_back(iv[d]);
      }
      auto start = start_indices(s, is.size(), bv);
      // XLA drops a window that does not fit entirely.
      std::string fits, dst;
      size_t w = 0;
      for (size_t d = 0; d < is.size(); ++d) {
        bool batching = std::count(s.operand_batching.begin(), s.operand_batching.end(), static_cast<int64_t>(d));
        int64_t wsize = 1;
        std::string c = start[d];
        if (w < window.size() && window[w] == static_cast<int64_t>(d)) {
          wsize = us.at(window_dims[w]);
          c = "(" + c + " + " + wv[w] + ")";
          ++w;
        }
        if (!batching)
          fits += (fits.empty() ? "" : " && ") + start[d] + " >= 0 && " + start[d] + " <= " +
                  std::to_string(is[d] - wsize) + "L";
        dst += c + " * " + std::to_string(ist[d]) + "L + ";
      }
      line("if (" + (fits.empty() ? std::string("true") : fits) + ") {");
      ++indent_;
      std::string di = fresh("di");
      line("const long " + di + " = " + dst + "0L;");
      std::vector<std::string> ups;
      for (size_t j = 0; j < n; ++j) ups.push_back(name(inst.operands[n + 1 + j]) + ".d[" + flat(us, iv) + "]");
      combine_into(inst.regions.at(0), res, di, ups);
      --indent_;
      line("}");
    });
  }

  void emit_sort(const Instruction& inst) {
    size_t n = inst.results.size();
    const Shape& s = type(inst.operands[0]).shape;
    int64_t dim = inst.attr_int("dimension", -1);
    if (dim < 0) dim += static_cast<int64_t>(s.size());
    if (dim < 0 || dim >= static_cast<int64_t>(s.size())) unsupported(inst, "dimension");
    int64_t len = s[dim];
    auto st = strides_of(s);
    Shape outer = s;
    outer[dim] = 1;
    work_ += count(inst.operands[0]) * 8;
    std::vector<std::string> res;
    for (size_t j = 0; j < n; ++j) res.push_back(decl(inst.results[j]));
    std::string perm = fresh("perm"), tmp = fresh("ptmp");
    // On the heap: MLX's CPU stream thread has a small stack on macOS.
    line("B<long, " + std::to_string(len) + "> " + perm + ", " + tmp + ";");
    loops(outer, [&](const std::vector<std::string>& iv) {
      std::string base = fresh("b");
      line("const long " + base + " = " + flat(s, iv) + ";");
      line("for (long k = 0; k < " + std::to_string(len) + "L; ++k) " + perm + ".d[k] = k;");
      line("msort(" + perm + ".d, " + tmp + ".d, " + std::to_string(len) + "L, [&](long a, long b) -> bool {");
      ++indent_;
      std::vector<std::string> args;
      for (size_t j = 0; j < n; ++j) {
        args.push_back(name(inst.operands[j]) + ".d[" + base + " + a * " + std::to_string(st[dim]) + "L]");
        args.push_back(name(inst.operands[j]) + ".d[" + base + " + b * " + std::to_string(st[dim]) + "L]");
      }
      auto rets = emit_scalar_region(inst.regions.at(0), args);
      line("return " + rets.at(0) + ";");
      --indent_;
      line("});");
      for (size_t j = 0; j < n; ++j)
        line("for (long k = 0; k < " + std::to_string(len) + "L; ++k) " + res[j] + ".d[" + base + " + k * " +
             std::to_string(st[dim]) + "L] = " + name(inst.operands[j]) + ".d[" + base + " + " + perm + ".d[k] * " +
             std::to_string(st[dim]) + "L];");
    });
  }
};

}  // namespace

std::optional<LoopSource> emit_loop(const compiler::Plan& plan, const compiler::Instruction& loop,
                                    std::string* why) {
  try {
    return Emitter(plan).run(loop);
  } catch (const Unsupported& u) {
    if (why) *why = u.why;
    return std::nullopt;
  }
}

}  // namespace pjrtx::backend::loops
