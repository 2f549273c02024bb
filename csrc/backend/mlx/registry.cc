#include "backend/mlx/registry.h"

#include <cstdint>

namespace pjrtx::backend {

Registry::Registry()
    : table_(static_cast<size_t>(compiler::Opcode::kCount), nullptr),
      counts_(new std::atomic<int64_t>[static_cast<size_t>(compiler::Opcode::kCount)]()) {
  register_constant_ops(*this);
  register_elementwise_ops(*this);
  register_compare_ops(*this);
  register_convert_ops(*this);
  register_structural_ops(*this);
  register_dot_ops(*this);
  register_reduce_ops(*this);
  register_call_ops(*this);
  register_indexing_ops(*this);
  register_pad_ops(*this);
  register_bitcast_ops(*this);
  register_sort_ops(*this);
  register_mhlo_chlo_ops(*this);
  register_approx_top_k_ops(*this);
  register_control_ops(*this);
  register_reduce_window_ops(*this);
  register_convolution_ops(*this);
  register_select_and_scatter_ops(*this);
  register_custom_call_ops(*this);
  register_collective_ops(*this);
  register_bit_ops(*this);
  register_rng_ops(*this);
  register_fft_ops(*this);
  register_linalg_factor_ops(*this);
  register_callback_ops(*this);
  register_linalg_eig_ops(*this);
  register_linalg_reduce_ops(*this);
  register_linalg_schur_ops(*this);
  register_linalg_tridiagonal_solve_ops(*this);
}

Registry& Registry::get() {
  static Registry* r = new Registry();
  return *r;
}

void Registry::add(compiler::Opcode op, Lowering fn) {
  table_[static_cast<size_t>(op)] = fn;
}

Lowering Registry::find(compiler::Opcode op) const {
  return table_[static_cast<size_t>(op)];
}

void Registry::add_target(const std::string& name, Lowering fn) {
  targets_[name] = {fn, std::make_unique<std::atomic<int64_t>>(0)};
}

Lowering Registry::find_target(const std::string& name) const {
  auto it = targets_.find(name);
  return it == targets_.end() ? nullptr : it->second.first;
}

void Registry::count_target(const std::string& name) {
  auto it = targets_.find(name);
  if (it != targets_.end()) it->second.second->fetch_add(1, std::memory_order_relaxed);
}

void Registry::count_lowering(compiler::Opcode op) {
  counts_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::pair<std::string, int64_t>> Registry::lowering_counts() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < table_.size(); ++i)
    if (int64_t n = counts_[i].load(std::memory_order_relaxed))
      out.emplace_back(compiler::opcode_name(static_cast<compiler::Opcode>(i)), n);
  for (const auto& [name, entry] : targets_)
    if (int64_t n = entry.second->load(std::memory_order_relaxed))
      out.emplace_back("custom_call @" + name, n);
  return out;
}

std::vector<std::string> Registry::supported_ops() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < table_.size(); ++i)
    if (table_[i] != nullptr)
      out.emplace_back(compiler::opcode_name(static_cast<compiler::Opcode>(i)));
  for (const auto& [name, entry] : targets_) out.emplace_back("custom_call @" + name);
  return out;
}

}  // namespace pjrtx::backend
