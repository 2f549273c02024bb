#include "backend/mlx/loops/emit_cxx.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backend/mlx/loops/emitter.h"

namespace pjrtx::backend::loops {

namespace emitter {

namespace {

// Constants of at most this many elements that a loop reads from outside
// are written into its code.
constexpr int64_t kBakedElements = 64;

// The instruction defining each value of `want` anywhere in `r` (nested
// regions included).
void find_producers(const compiler::Region& r, const std::set<ValueId>& want,
                    std::map<ValueId, const Instruction*>& out) {
  for (const Instruction& i : r.body) {
    for (ValueId v : i.results)
      if (want.count(v)) out[v] = &i;
    for (const compiler::Region& sub : i.regions) find_producers(sub, want, out);
  }
}

}  // namespace

LoopSource Emitter::run(const Instruction& loop) {
  check_tree(loop);
  count_calls(loop);
  // Values read inside the loop but defined outside it: inputs after the
  // operands.
  std::set<ValueId> defined, read;
  collect(loop, defined, read, /*top=*/true);
  LoopSource src;
  std::set<ValueId> outside;
  for (ValueId v : read)
    if (!defined.count(v)) outside.insert(v);
  // Small constants defined outside the loop (the frontend hoists and
  // shares a body's constants) are written into the code, not passed in:
  // the C++ compiler folds them (x * 0.5, i % 4096 as a mask), and the call
  // reads no array for them.
  // And an operand that is a constant splat (a scalar constant broadcast,
  // as vmap makes a batched counter's zeros) starts as that value in the
  // code: the call then needs no MLX node to compute it.
  std::set<ValueId> want = outside;
  want.insert(loop.operands.begin(), loop.operands.end());
  std::map<ValueId, const Instruction*> producer;
  for (const compiler::Function& f : plan_.functions) find_producers(f.body, want, producer);
  std::set<ValueId> sources;  // what the operands' broadcasts read
  for (ValueId v : loop.operands)
    if (auto it = producer.find(v); it != producer.end() && it->second->op == Opcode::broadcast_in_dim)
      sources.insert(it->second->operands.at(0));
  for (const compiler::Function& f : plan_.functions) find_producers(f.body, sources, producer);
  auto constant_of = [&](ValueId v) -> const Instruction* {
    auto it = producer.find(v);
    return it != producer.end() && it->second->op == Opcode::constant ? it->second : nullptr;
  };
  std::map<ValueId, const Instruction*> baked;
  for (ValueId v : outside)
    if (const Instruction* c = constant_of(v); c && count(v) <= kBakedElements) baked[v] = c;
  for (ValueId v : outside)
    if (!baked.count(v)) src.captured.push_back(v);
  // The splat element of operand v (a literal), or "" when v is not one.
  auto splat_of = [&](ValueId v) -> std::string {
    const Instruction* c = constant_of(v);
    if (!c) {
      auto it = producer.find(v);
      if (it == producer.end() || it->second->op != Opcode::broadcast_in_dim) return "";
      c = constant_of(it->second->operands.at(0));
    }
    if (!c) return "";
    const compiler::DenseData& dd = c->attr_dense("value");
    const DType t = type(c->results[0]).dtype;
    if (!(dd.splat || count(c->results[0]) == 1) || type(v).dtype != t ||
        dd.bytes.size() < static_cast<size_t>(compiler::dtype_size(t)))
      return "";
    return literal(t, dd.bytes.data());
  };
  src.symbol = "pjrtx_host_loop";
  std::ostringstream body;
  out_ = &body;
  indent_ = 1;
  size_t k = 0;
  std::vector<std::string> ops;
  std::vector<bool> init_move;
  for (ValueId v : loop.operands) {
    if (std::string lit = splat_of(v); !lit.empty() && count(v) > 0) {
      std::string n = fresh("init");
      line(buf_type(v) + " " + n + ";");
      line(each(v) + n + ".d[k] = " + lit + ";");
      ops.push_back(n);
      init_move.push_back(true);
      src.operand_in_code.push_back(true);
      continue;
    }
    std::string n = "in" + std::to_string(k);
    line("const C<" + elem(v) + "> " + n + "{static_cast<const " + elem(v) + "*>(in[" +
         std::to_string(k) + "])};");
    ops.push_back(n);
    init_move.push_back(false);
    src.operand_in_code.push_back(false);
    ++k;
  }
  for (const auto& [v, inst] : baked) emit_constant(*inst);
  for (ValueId v : src.captured) {
    std::string n = "v" + std::to_string(v);
    line("const C<" + elem(v) + "> " + n + "{static_cast<const " + elem(v) + "*>(in[" +
         std::to_string(k) + "])};");
    names_[v] = n;
    ++k;
  }
  // The entry's operands are input views: the state starts as copies.
  std::vector<std::string> states = emit_while(loop, ops, init_move);
  for (size_t i = 0; i < states.size(); ++i) {
    int64_t bytes = plan_.type(loop.results[i]).byte_size();
    if (bytes) line("__builtin_memcpy(out[" + std::to_string(i) + "], " + states[i] + ".d, " + std::to_string(bytes) + ");");
  }
  std::ostringstream tu;
  for (const std::string& def : fn_defs_) tu << def << "\n";
  tu << "extern \"C\" int " << src.symbol
     << "(const void* const* in, void* const* out, const pjrtx_host_calls* calls) {\n"
     << "  CallsScope calls_scope(calls);\n  try {\n"
     << body.str() << "  } catch (const CallbackFailed&) {\n    return 2;\n  } catch (...) {\n    return 1;\n  }\n"
     << "  return 0;\n}\n";
  src.callbacks = std::move(callbacks_);
  src.linalg = uses_linalg_;
  src.code = tu.str();
  src.work = work_;
  src.ops = ops_;
  return src;
}

// V<T, N> for values up to 256 bytes, else B<T, N>.
std::string Emitter::buf_type(ValueId v) const {
  const TensorType& t = type(v);
  return std::string(t.byte_size() <= 256 ? "V<" : "B<") + ctype(t.dtype) + ", " +
         std::to_string(t.num_elements()) + ">";
}

// Every op, type and callee in the loop, before any code: the first thing
// the engine lacks is the answer.
void Emitter::check_tree(const Instruction& inst, int depth) {
  if (depth > 64) unsupported(inst, "nesting deeper than 64");
  for (ValueId v : inst.operands)
    if (!ctype(type(v).dtype)) unsupported(inst, "element type " + type(v).str());
  for (ValueId v : inst.results)
    if (!ctype(type(v).dtype)) unsupported(inst, "element type " + type(v).str());
  if (!supported_op(inst.op) && !mhlo_chlo_function(inst) && !is_callback(inst)) unsupported(inst);
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

bool Emitter::supported_op(Opcode op) {
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
    case Opcode::while_: case Opcode::xor_: case Opcode::call: case Opcode::cholesky:
    case Opcode::triangular_solve: case Opcode::rng_bit_generator: case Opcode::real:
    case Opcode::imag: case Opcode::complex: case Opcode::fused_multiply_add:
      return true;
    default:
      return false;
  }
}

bool Emitter::complex_op(Opcode op) {
  switch (op) {
    case Opcode::add: case Opcode::subtract: case Opcode::multiply: case Opcode::negate:
    case Opcode::compare: case Opcode::convert: case Opcode::real: case Opcode::imag:
    case Opcode::complex: case Opcode::select: case Opcode::broadcast_in_dim: case Opcode::reshape:
    case Opcode::transpose: case Opcode::slice: case Opcode::dynamic_slice:
    case Opcode::dynamic_update_slice: case Opcode::concatenate: case Opcode::reverse: case Opcode::pad:
    case Opcode::gather: case Opcode::scatter: case Opcode::constant: case Opcode::while_:
    case Opcode::case_: case Opcode::if_: case Opcode::call: case Opcode::optimization_barrier:
    case Opcode::reduce: case Opcode::custom_call:
      return true;
    default:
      return false;
  }
}

void Emitter::count_calls(const Instruction& inst) {
  for (const Region& r : inst.regions)
    for (const Instruction& i : r.body) count_calls(i);
  if (inst.op == Opcode::call) {
    const std::string callee = inst.attr_str("callee");
    if (call_sites_[callee]++ == 0)
      for (const Instruction& i : plan_.find_function(callee)->body.body) count_calls(i);
  }
}

// Values defined and read anywhere inside inst's regions (and callees).
void Emitter::collect(const Instruction& inst, std::set<ValueId>& defined, std::set<ValueId>& read,
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
void Emitter::reads_of(const Instruction& inst, std::set<ValueId>& out) {
  std::set<ValueId> defined, read;
  collect(inst, defined, read, true);
  for (ValueId v : inst.operands) out.insert(v);
  for (ValueId v : read)
    if (!defined.count(v)) out.insert(v);
}

std::string Emitter::name(ValueId v) const {
  auto it = names_.find(v);
  if (it == names_.end()) throw Unsupported{"value %" + std::to_string(v) + " read before it is defined"};
  return it->second;
}

std::string Emitter::value_name(ValueId v) {
  if (!local_names_) return "v" + std::to_string(v);
  auto [it, added] = local_names_->emplace(v, static_cast<int>(local_names_->size()));
  return "l" + std::to_string(it->second);
}

// Declares the buffer of result v and binds it. `empty`: a heap buffer
// without storage yet, for a result that is assigned whole (assign()).
std::string Emitter::decl(ValueId v, bool empty) {
  std::string n = value_name(v);
  const bool heap = type(v).byte_size() > 256;
  line(buf_type(v) + " " + n + (empty && heap ? "{nullptr};" : ";"));
  names_[v] = n;
  movable_.insert(n);
  return n;
}

// Nested loops over `shape` (i0, i1, ...); body gets the index names.
void Emitter::loops(const Shape& shape, const std::function<void(const std::vector<std::string>&)>& body) {
  std::vector<std::string> iv;
  int opened = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string i = fresh("i");
    iv.push_back(i);
    if (shape[d] == 1)
      line("{ constexpr long " + i + " = 0;");  // as each(): no loop over one index
    else
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

std::string Emitter::flat(const Shape& shape, const std::vector<std::string>& iv) {
  auto st = strides_of(shape);
  std::vector<std::pair<std::string, int64_t>> t;
  for (size_t d = 0; d < iv.size(); ++d) t.push_back({iv[d], st[d]});
  return affine(0, t);
}

// Emits a region's instructions with its params bound to `args` (their
// buffers; `args_movable` says which an op may consume), and returns the
// names of its returns. The caller opens and closes the C++ scope.
std::vector<std::string> Emitter::emit_region(const Region& r, const std::vector<std::string>& args,
                                              const std::vector<bool>& args_movable,
                                              const std::set<std::string>& outer_movable) {
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
std::vector<std::string> Emitter::emit_scalar_region(const Region& r, const std::vector<std::string>& exprs) {
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
void Emitter::combine_into(const Region& body, const std::vector<std::string>& res, const std::string& at,
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
void Emitter::assign(const std::string& dst, const std::string& src, ValueId v, bool move) {
  if (move) {
    line(dst + " = mv(" + src + ");");
  } else {
    work_ += count(v);
    line("copy_into(" + dst + ", " + src + ", " + n_of(v) + ");");
  }
}

// A while loop whose state starts as `init` (buffer names; init_move says
// which may be taken over). Returns the state buffers, the loop's results.
std::vector<std::string> Emitter::emit_while(const Instruction& inst, const std::vector<std::string>& init,
                                             const std::vector<bool>& init_move) {
  const Region& cond = inst.regions.at(0);
  const Region& body = inst.regions.at(1);
  std::vector<std::string> st;
  for (size_t i = 0; i < init.size(); ++i) {
    ValueId v = inst.results.at(i);
    std::string s = fresh("s");
    if (init_move[i]) line(buf_type(v) + " " + s + "(mv(" + init[i] + "));");
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
    if (!temp) line(st[i] + " = mv(" + rets[i] + ");");
  }
  for (auto& [i, t] : temps) line(st[i] + " = mv(" + t + ");");
  movable_ = saved;
  --indent_;
  line("}");
  --indent_;
  line("}");
  return st;
}

// Results declared here, then each branch in its own scope assigns them.
void Emitter::emit_branches(const Instruction& inst, const std::string& selector) {
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

// Whether every operand and result of a call fits in 4 KiB: outlined, such
// a callee's in-place updates of its operands become copies of at most that.
bool Emitter::small_interface(const Instruction& inst) const {
  for (ValueId v : inst.operands)
    if (type(v).byte_size() > 4096) return false;
  for (ValueId v : inst.results)
    if (type(v).byte_size() > 4096) return false;
  return true;
}

int64_t Emitter::ops_in(const compiler::Region& r) {
  int64_t n = 0;
  for (const Instruction& i : r.body) {
    ++n;
    for (const compiler::Region& sub : i.regions) n += ops_in(sub);
    if (i.op == Opcode::call) n += callee_ops(i.attr_str("callee"));
  }
  return n;
}

int64_t Emitter::callee_ops(const std::string& callee) {
  auto it = callee_ops_.find(callee);
  if (it != callee_ops_.end()) return it->second;
  callee_ops_[callee] = 0;  // a recursive call counts nothing (check_tree refuses it)
  const int64_t n = ops_in(plan_.find_function(callee)->body);
  callee_ops_[callee] = n;
  return n;
}

void Emitter::emit_call(const Instruction& inst, const std::vector<bool>& consume) {
  const std::string callee = inst.attr_str("callee");
  if (callee_ops(callee) > kOutlineOps && (call_sites_[callee] > 1 || small_interface(inst)))
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

void Emitter::emit_outlined_call(const Instruction& inst, const std::string& callee) {
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
const Emitter::Outlined& Emitter::outline(const std::string& callee) {
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
  auto* saved_locals = local_names_;
  const int saved_fresh = fresh_;
  std::map<ValueId, int> locals;
  local_names_ = &locals;
  fresh_ = 0;
  auto saved_mov = movable_;
  auto saved_dying = dying_;
  std::ostringstream* saved_out = out_;
  const int saved_indent = indent_;
  const int64_t work0 = work_, ops0 = ops_;
  std::ostringstream body;
  out_ = &body;
  indent_ = 1;
  names_.clear();
  std::string sig;
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
  const std::string text = sig + ") {\n" + body.str() + "}\n";
  auto [same, added] = fn_by_text_.emplace(text, fn);
  if (added) fn_defs_.push_back("__attribute__((noinline)) static void " + fn + "(" + text);
  Outlined& o = outlined_[callee];
  o.fn = same->second;
  local_names_ = saved_locals;
  fresh_ = saved_fresh;
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

std::string Emitter::sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o.substr(0, 40);
}

}  // namespace emitter

std::optional<LoopSource> emit_loop(const compiler::Plan& plan, const compiler::Instruction& loop,
                                    std::string* why) {
  try {
    return emitter::Emitter(plan).run(loop);
  } catch (const emitter::Unsupported& u) {
    if (why) *why = u.why;
    return std::nullopt;
  }
}

}  // namespace pjrtx::backend::loops
