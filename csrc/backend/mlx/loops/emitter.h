// The host loop engine's emitter, shared by the files that emit each
// family of ops (internal to loops/; the public entry is emit_cxx.h):
// - emit_cxx.cc: the driver, analysis, regions and control flow (while,
//   case/if, func.call and its outlined functions);
// - emit_cxx_ops.cc: one instruction: the dispatch, element-wise ops,
//   compares, converts, constants, slices and other views;
// - emit_cxx_arrays.cc: pad, dot, reduce, gather, scatter, sort, cholesky,
//   triangular_solve, rng_bit_generator.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/mlx/host_callback.h"
#include "backend/mlx/loops/loop_source.h"
#include "compiler/plan.h"

namespace pjrtx::backend::loops::emitter {

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

[[noreturn]] inline void unsupported(const Instruction& inst, const std::string& what = "") {
  throw Unsupported{inst.where() + (what.empty() ? "" : ": " + what)};
}

// The CHLO ops jaxlib 0.8.0 to 0.9.0 send as custom_call @mhlo.<op>
// (ops/mhlo_chlo.cc): the C++ function each calls on a real float, or
// nullptr for any other target.
inline const char* mhlo_chlo_function(const Instruction& inst) {
  if (inst.op != Opcode::custom_call) return nullptr;
  const std::string t = inst.attr_str("call_target_name", "");
  if (t == "mhlo.erf") return "m_erf";
  if (t == "mhlo.acos") return "m_acos";
  if (t == "mhlo.asin") return "m_asin";
  if (t == "mhlo.acosh") return "m_acosh";
  if (t == "mhlo.atanh") return "m_atanh";
  if (t == "mhlo.sinh") return "m_sinh";
  if (t == "mhlo.cosh") return "m_cosh";
  return nullptr;
}

// A host callback (custom_call @pjrtx_callback, host_callback.h): the loop
// calls it through the engine. Ordered ones carry tokens, which the engine
// has no type for (check_tree refuses them).
inline bool is_callback(const Instruction& inst) {
  return inst.op == Opcode::custom_call && inst.attr_str("call_target_name", "") == kCallbackTarget;
}

inline const char* ctype(DType t) {
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
    case DType::kC64: return "cx<float>";
    case DType::kC128: return "cx<double>";
    default: return nullptr;
  }
}

inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// "c0 + i0 * s0 + i1 * s1" with zero terms left out.
inline std::string affine(int64_t base, const std::vector<std::pair<std::string, int64_t>>& terms) {
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
inline std::string literal(DType t, const uint8_t* p) {
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
    case DType::kC64:
      return "cx<float>{" + literal(DType::kF32, p) + ", " + literal(DType::kF32, p + 4) + "}";
    case DType::kC128:
      return "cx<double>{" + literal(DType::kF64, p) + ", " + literal(DType::kF64, p + 8) + "}";
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

  LoopSource run(const Instruction& loop);

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
  // Inside an outlined function values are named l0, l1, ... in the order
  // they are declared, and fresh names restart, so two callees with the
  // same body (JAX emits threefry2x32, threefry2x32_0, ... as copies) have
  // the same text: one C++ function serves both (fn_by_text_: parameters
  // and body -> function name).
  std::map<ValueId, int>* local_names_ = nullptr;
  std::map<std::string, std::string> fn_by_text_;
  // The host callbacks the code calls (LoopSource::callbacks).
  std::vector<LoopCallback> callbacks_;
  // LoopSource::linalg.
  bool uses_linalg_ = false;

  // ---- checks and analysis ------------------------------------------------

  const TensorType& type(ValueId v) const { return plan_.type(v); }
  std::string elem(ValueId v) const { return ctype(type(v).dtype); }
  int64_t count(ValueId v) const { return type(v).num_elements(); }
  std::string n_of(ValueId v) const { return std::to_string(count(v)) + "L"; }
  // The head of an element-wise statement over v's elements, index k. One
  // element needs no loop: `if (constexpr long k = 0; true)` gives GCC a
  // loop fewer to build and unroll (a latency-bound body is mostly scalars;
  // issue 36's `ode`: 12 of cc1plus's 72 ms CPU).
  std::string each(ValueId v) const {
    return count(v) == 1 ? "if (constexpr long k = 0; true) " : "for (long k = 0; k < " + n_of(v) + "; ++k) ";
  }
  // V<T, N> for values up to 256 bytes, else B<T, N>.
  std::string buf_type(ValueId v) const;

  // Every op, type and callee in the loop, before any code: the first thing
  // the engine lacks is the answer.
  void check_tree(const Instruction& inst, int depth = 0);

  static bool supported_op(Opcode op);

  // Whether the emitter takes `op` with complex operands or results (the
  // prelude's cx: + - *, negation, ==, !=, converts into complex,
  // real/imag/complex, data movement and control flow).
  static bool complex_op(Opcode op);

  void count_calls(const Instruction& inst);

  // Values defined and read anywhere inside inst's regions (and callees).
  void collect(const Instruction& inst, std::set<ValueId>& defined, std::set<ValueId>& read,
               bool top);

  // The values an instruction reads from its enclosing scope: operands and
  // what its regions capture.
  void reads_of(const Instruction& inst, std::set<ValueId>& out);

  // ---- output -------------------------------------------------------------

  void line(const std::string& s) { *out_ << std::string(2 * indent_, ' ') << s << "\n"; }
  std::string fresh(const char* p) { return p + std::to_string(fresh_++); }
  std::string name(ValueId v) const;
  // The C++ name a value's buffer is declared as.
  std::string value_name(ValueId v);
  // Declares the buffer of result v and binds it. `empty`: a heap buffer
  // without storage yet, for a result that is assigned whole (assign()).
  std::string decl(ValueId v, bool empty = false);
  // Nested loops over `shape` (i0, i1, ...); body gets the index names.
  void loops(const Shape& shape, const std::function<void(const std::vector<std::string>&)>& body);
  std::string flat(const Shape& shape, const std::vector<std::string>& iv);

  // ---- regions --------------------------------------------------------------

  // Emits a region's instructions with its params bound to `args` (their
  // buffers; `args_movable` says which an op may consume), and returns the
  // names of its returns. The caller opens and closes the C++ scope.
  std::vector<std::string> emit_region(const Region& r, const std::vector<std::string>& args,
                                       const std::vector<bool>& args_movable,
                                       const std::set<std::string>& outer_movable = {});

  // Runs `r` on scalar arguments (a reduce, sort or scatter body): each
  // param gets a V<T, 1> holding its expression; returns the element
  // expressions of the returns.
  std::vector<std::string> emit_scalar_region(const Region& r, const std::vector<std::string>& exprs);

  // res[j].d[at] = body(res[j].d[at]..., updates...) for a reduce or scatter
  // body; every accumulator reads the old values before any is written.
  void combine_into(const Region& body, const std::vector<std::string>& res, const std::string& at,
                    const std::vector<std::string>& updates);

  // `dst = src` for two buffers of value v's type (moved when allowed).
  void assign(const std::string& dst, const std::string& src, ValueId v, bool move);

  // ---- control flow -----------------------------------------------------------

  // A while loop whose state starts as `init` (buffer names; init_move says
  // which may be taken over). Returns the state buffers, the loop's results.
  std::vector<std::string> emit_while(const Instruction& inst, const std::vector<std::string>& init,
                                      const std::vector<bool>& init_move);

  // Results declared here, then each branch in its own scope assigns them.
  void emit_branches(const Instruction& inst, const std::string& selector);

  // A big callee (over kOutlineOps ops, e.g. threefry) becomes one C++
  // function over views of its operands, noinline: called from several
  // places, the body compiles once; called from one with a small interface
  // (small_interface), it splits the loop's one huge function, whose build
  // time grows faster than its size (GCC's alias walk, register
  // allocation): numpyro's ESS loop built in 22 s as one function, 18 s
  // with its callees apart. A callee over big buffers called once is
  // inlined, so it can update its operands in place at their last use. A
  // small callee (jnp.remainder's dozen ops) is inlined at every site: there
  // its operands are often constants the C++ compiler folds in (x % 4096
  // becomes a mask, not an integer division), which a function hides.
  static constexpr int64_t kOutlineOps = 48;

  int64_t ops_in(const compiler::Region& r);

  bool small_interface(const Instruction& inst) const;

  int64_t callee_ops(const std::string& callee);

  void emit_call(const Instruction& inst, const std::vector<bool>& consume);

  void emit_outlined_call(const Instruction& inst, const std::string& callee);

  // The C++ function for `callee`: its params are views, its results are
  // written to the caller's buffers. Emitted on first use, in a scope of its
  // own (a function reads nothing but its params).
  const Outlined& outline(const std::string& callee);

  static std::string sanitize(const std::string& s);

  // ---- one instruction -------------------------------------------------------

  void emit(const Instruction& inst, const std::vector<bool>& consume);

  // The result buffer of an op that updates its first operand: the operand's
  // own buffer at its last use, else a copy.
  std::string take_or_copy(ValueId result, ValueId operand, bool consume);

  template <class El>
  void emit_compare(const Instruction& inst, const El& el);

  void emit_constant(const Instruction& inst);

  // A host callback: results declared here, then one call through the
  // engine (host_call) with the operands' and results' storage.
  void emit_callback(const Instruction& inst);

  void emit_pad(const Instruction& inst);

  void emit_dot(const Instruction& inst);

  void emit_reduce(const Instruction& inst);

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
                                         const std::vector<std::string>& bv);

  void emit_gather(const Instruction& inst);

  void emit_scatter(const Instruction& inst, const std::vector<bool>& consume);

  void emit_sort(const Instruction& inst);

  // stablehlo.cholesky and triangular_solve on f32/f64, per matrix of the
  // batch, through host/linalg_kernels.h (built after the prelude).
  void emit_cholesky(const Instruction& inst);

  void emit_triangular_solve(const Instruction& inst);

  // stablehlo.rng_bit_generator: the prelude's Threefry and Philox streams,
  // bit for bit as XLA:CPU's (and ops/rng.cc's on MLX).
  void emit_rng_bit_generator(const Instruction& inst);
};

}  // namespace pjrtx::backend::loops::emitter
