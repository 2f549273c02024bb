// LowerCtx (lower_ctx.h): the view of one instruction a lowering works
// from, and its way back to the program's lowering through ProgramLowering.
#include "backend/mlx/lower_ctx.h"

#include "common/error.h"

namespace pjrtx::backend {

using compiler::Region;

const compiler::TensorType& LowerCtx::in(size_t i) const {
  if (i >= inst_.operands.size()) fail("expects at least ", i + 1, " operands");
  if (!parts_.empty()) return parts_[i];
  return plan_.type(inst_.operands[i]);
}

const compiler::TensorType& LowerCtx::out(size_t i) const {
  if (i >= inst_.results.size()) fail("expects at least ", i + 1, " results");
  if (!parts_.empty()) return parts_[inst_.operands.size() + i];
  return plan_.type(inst_.results[i]);
}

void LowerCtx::set_parts_view(bool c64_parts) {
  parts_.clear();
  auto add = [&](compiler::ValueId v) {
    compiler::TensorType t = plan_.type(v);
    if (t.dtype == compiler::DType::kC128 || (c64_parts && t.dtype == compiler::DType::kC64))
      t.dtype = compiler::DType::kF64;
    parts_.push_back(t);
  };
  for (auto v : inst_.operands) add(v);
  for (auto v : inst_.results) add(v);
  // An instruction with no operands or results has nothing to view.
  if (parts_.empty()) parts_.push_back({});
}

std::shared_ptr<const RegionProgram> LowerCtx::lower_region(const Region& r) {
  return parts_.empty() ? lowerer_.lower_region(r) : lowerer_.lower_region_parts(r);
}

std::shared_ptr<const RegionProgram> LowerCtx::lower_function(const std::string& name) {
  return lowerer_.lower_function(name);
}

std::optional<mx::array> LowerCtx::constant_value(compiler::ValueId v) const {
  if (!parts_.empty() && plan_.type(v).dtype == compiler::DType::kC128) return std::nullopt;
  auto it = lowerer_.constants().find(v);
  if (it == lowerer_.constants().end()) return std::nullopt;
  return it->second;
}

const DeviceContext& LowerCtx::device() const { return lowerer_.device(); }

RunState LowerCtx::constant_state() const {
  RunState st;
  st.slots.resize(plan_.values.size());
  for (const auto& [v, a] : lowerer_.constants()) st.slots[v] = a;
  return st;
}

void LowerCtx::fail_message(const std::string& msg) const {
  std::string s = "[" + std::string(compiler::opcode_name(inst_.op)) + "] " + msg;
  if (!inst_.loc.empty()) s += " at " + inst_.loc;
  throw Error(ErrorCode::kInvalidArgument, s);
}

}  // namespace pjrtx::backend
