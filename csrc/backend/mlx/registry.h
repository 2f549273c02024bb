// The registry of lowerings: opcode -> function that turns one plan
// instruction into a Kernel at compile time. Attributes are parsed and
// checked once, in the lowering; the Kernel only builds MLX graph nodes.
//
// Adding an op: write `Kernel lower_foo(LowerCtx&)` in ops/<family>.cc and
// add one line to that family's register function.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/mlx/lower_ctx.h"

namespace pjrtx::backend {

using Lowering = Kernel (*)(LowerCtx&);

class Registry {
 public:
  static Registry& get();
  void add(compiler::Opcode op, Lowering fn);
  Lowering find(compiler::Opcode op) const;
  // stablehlo.custom_call targets (call_target_name -> lowering): library
  // calls JAX emits (@Qr, ...) and pjrtx's own (linalg, host callbacks).
  void add_target(const std::string& name, Lowering fn);
  Lowering find_target(const std::string& name) const;
  // Ops with a lowering, then custom_call targets as "custom_call @name".
  std::vector<std::string> supported_ops() const;

  // How often each op was lowered in this process (for tests that check
  // every registered lowering is exercised).
  void count_lowering(compiler::Opcode op);
  void count_target(const std::string& name);
  std::vector<std::pair<std::string, int64_t>> lowering_counts() const;

 private:
  Registry();
  std::vector<Lowering> table_;
  std::unique_ptr<std::atomic<int64_t>[]> counts_;
  // Targets are registered before any compile (the constructor) and only
  // read afterwards; their counts are atomics for concurrent compiles.
  std::map<std::string, std::pair<Lowering, std::unique_ptr<std::atomic<int64_t>>>> targets_;
};

// Kernel helpers for the common shapes of lowering.
template <typename F>
Kernel unary(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{f(in[0])}; };
}
template <typename F>
Kernel binary(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{f(in[0], in[1])}; };
}
template <typename F>
Kernel nary(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{f(in)}; };
}

// Family registration (one function per ops/<family>.cc).
void register_constant_ops(Registry& r);
void register_elementwise_ops(Registry& r);
void register_compare_ops(Registry& r);
void register_convert_ops(Registry& r);
void register_structural_ops(Registry& r);
void register_dot_ops(Registry& r);
void register_reduce_ops(Registry& r);
void register_call_ops(Registry& r);
void register_indexing_ops(Registry& r);
void register_pad_ops(Registry& r);
void register_bitcast_ops(Registry& r);
void register_sort_ops(Registry& r);
void register_mhlo_chlo_ops(Registry& r);
void register_approx_top_k_ops(Registry& r);
void register_control_ops(Registry& r);
void register_reduce_window_ops(Registry& r);
void register_convolution_ops(Registry& r);
void register_select_and_scatter_ops(Registry& r);
void register_custom_call_ops(Registry& r);
void register_collective_ops(Registry& r);
void register_bit_ops(Registry& r);
void register_rng_ops(Registry& r);
void register_fft_ops(Registry& r);
void register_linalg_factor_ops(Registry& r);
void register_callback_ops(Registry& r);
void register_linalg_eig_ops(Registry& r);
void register_linalg_reduce_ops(Registry& r);
void register_linalg_schur_ops(Registry& r);
void register_linalg_tridiagonal_solve_ops(Registry& r);

}  // namespace pjrtx::backend
