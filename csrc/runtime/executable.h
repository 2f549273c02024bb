// A compiled program bound to the client's device. execute() checks the
// arguments, creates the output buffers and returns at once; the executor
// builds the MLX graph, evaluates it and then fires the outputs' events (or
// fails them with the error that stopped the run).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/client.h"

namespace pjrtx::backend {
class Program;
}

namespace pjrtx::runtime {

class LoadedExecutable {
 public:
  LoadedExecutable(Client* client, std::shared_ptr<const compiler::Plan> plan,
                   std::shared_ptr<backend::Program> program, std::string fingerprint);
  ~LoadedExecutable();

  Client* client() const { return client_; }
  const std::string& name() const { return plan_->name; }
  const std::string& fingerprint() const { return fingerprint_; }
  const std::vector<compiler::TensorType>& output_types() const { return output_types_; }
  const std::vector<compiler::TensorType>& param_types() const { return param_types_; }
  // The memory each output lands in and the memory kind of each parameter:
  // what the program's `mhlo.memory_kind` attributes name, else "device".
  const std::vector<Memory*>& output_memories() const { return output_memories_; }
  const std::vector<Memory*>& param_memories() const { return param_memories_; }
  const compiler::Plan& plan() const { return *plan_; }

  struct Result {
    std::vector<BufferPtr> outputs;
    EventPtr done;
  };
  // Throws INVALID_ARGUMENT for a wrong argument count or type or a deleted
  // (or donated) argument, FAILED_PRECONDITION for a deleted executable.
  // Arguments the program may donate (Function::donors) and the caller does
  // not list in `non_donatable` are deleted on return, as XLA deletes a
  // donated buffer: the run still reads them, then lets MLX reuse their
  // memory for an output.
  Result execute(const std::vector<BufferPtr>& args,
                 const std::vector<int64_t>& non_donatable = {});
  // Whether parameter i may be donated.
  bool donates(size_t i) const { return i < donors_.size() && donors_[i]; }

  void mark_deleted() { deleted_ = true; }
  bool is_deleted() const { return deleted_; }

 private:
  Client* client_;
  std::shared_ptr<const compiler::Plan> plan_;
  std::shared_ptr<backend::Program> program_;
  std::string fingerprint_;
  // Microseconds the last run took from eval dispatch to ready: short runs
  // are waited for on the executor when it has nothing else to do. Unknown
  // before the first run, which is handed to the completion thread.
  std::shared_ptr<std::atomic<int64_t>> last_wait_us_ =
      std::make_shared<std::atomic<int64_t>>(int64_t{1} << 40);
  std::vector<compiler::TensorType> param_types_, output_types_;
  std::vector<bool> donors_;
  std::vector<Memory*> param_memories_, output_memories_;
  std::atomic<bool> deleted_{false};
};

}  // namespace pjrtx::runtime
