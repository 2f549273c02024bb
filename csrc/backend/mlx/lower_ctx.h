// What a lowering sees while it turns one plan instruction into a Kernel:
// the instruction, its operand and result types, the device it is lowered
// for, and a way to lower nested regions or called functions.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "backend/mlx/region_program.h"

namespace pjrtx::backend {

// What a lowering may ask of the lowering of the whole program (Lowerer,
// program.h, implements it): nested regions, called functions, the
// constants lowered so far and the device. An interface here, so that
// LowerCtx, the registry and the op families sit below program.h rather
// than in a loop with it.
class ProgramLowering {
 public:
  virtual ~ProgramLowering() = default;
  virtual std::shared_ptr<const RegionProgram> lower_region(const compiler::Region& r) = 0;
  // The region in the parts view (complex128.h).
  virtual std::shared_ptr<const RegionProgram> lower_region_parts(const compiler::Region& r) = 0;
  virtual std::shared_ptr<const RegionProgram> lower_function(const std::string& name) = 0;
  virtual const std::map<compiler::ValueId, mx::array>& constants() const = 0;
  virtual const DeviceContext& device() const = 0;
};

class LowerCtx {
 public:
  LowerCtx(ProgramLowering& lowerer, const compiler::Plan& plan,
           const compiler::Instruction& inst)
      : lowerer_(lowerer), plan_(plan), inst_(inst) {}

  const compiler::Instruction& inst() const { return inst_; }
  const compiler::Plan& plan() const { return plan_; }
  // The parts view (complex128.cc): c128 operand and result types read as
  // f64 of the same shape, the type of each part of a complex128 value, so
  // an op's own f64 lowering builds the kernel that runs on each part; a
  // c128 constant operand then reads as unknown (constant_value).
  // `c64_parts`: complex64 operands read as f64 too (a dot_general or
  // convolution of c64 operands with a c128 result widens their parts).
  void set_parts_view(bool c64_parts = false);
  const compiler::TensorType& in(size_t i) const;
  const compiler::TensorType& out(size_t i) const;
  size_t num_in() const { return inst_.operands.size(); }
  size_t num_out() const { return inst_.results.size(); }
  std::shared_ptr<const RegionProgram> lower_region(const compiler::Region& r);
  std::shared_ptr<const RegionProgram> lower_function(const std::string& name);
  // A run state holding the plan's constants lowered so far, for evaluating
  // a region at compile time (probes); other captured values stay unset.
  RunState constant_state() const;
  // The value of `v` when a constant instruction defines it.
  std::optional<mx::array> constant_value(compiler::ValueId v) const;
  // The device this program is lowered for.
  const DeviceContext& device() const;

  // Throws INVALID_ARGUMENT "[<op>] <message> at <loc>".
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const;
  [[noreturn]] void fail_message(const std::string& msg) const;

 private:
  ProgramLowering& lowerer_;
  const compiler::Plan& plan_;
  const compiler::Instruction& inst_;
  std::vector<compiler::TensorType> parts_;  // operands then results, when set
};

template <typename... Args>
void LowerCtx::fail(const Args&... args) const {
  std::ostringstream os;
  (os << ... << args);
  fail_message(os.str());
}

}  // namespace pjrtx::backend
