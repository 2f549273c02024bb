// A compiled program bound to the devices of its device assignment. execute()
// checks the arguments, creates the output buffers and returns at once; each
// device's executor builds its MLX graph, evaluates it and then fires its
// outputs' events (or fails them with the error that stopped the run). On
// several devices every device runs its own lowering of the same plan at
// once, and their collectives meet in one CollectiveRun per execution.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/compile_cache.h"
#include "runtime/device.h"

namespace pjrtx::backend {
class Program;
class CollectiveRun;
struct ProcessLayout;
}

namespace pjrtx::runtime {

class Client;

// What an executable takes from the client that compiles it. The client
// hands it over (client.h includes this header), so an executable never
// calls back up into the client.
struct ClientLink {
  Client* client = nullptr;  // only handed back, by client()
  // The assignment's devices in assignment order (other processes' too).
  std::vector<Device*> devices;
  // Client::launch_mutex(): held while a multi-device run is posted.
  std::mutex* launch_mu = nullptr;
  int process_index = 0, process_count = 1;
};

class LoadedExecutable {
 public:
  LoadedExecutable(ClientLink link, std::shared_ptr<const CompiledProgram> compiled);
  ~LoadedExecutable();

  Client* client() const { return client_; }
  const std::string& name() const { return plan_->name; }
  const std::string& fingerprint() const { return compiled_->fingerprint; }
  const DeviceAssignment& assignment() const { return compiled_->assignment; }
  // This process's devices of the assignment, in assignment order (the
  // addressable devices; with one process, logical device i runs on
  // devices()[i]). logical_index(k) is devices()[k]'s place in the
  // assignment.
  const std::vector<Device*>& devices() const { return local_devices_; }
  int logical_index(size_t k) const { return local_[k]; }
  const std::vector<compiler::TensorType>& output_types() const { return output_types_; }
  const std::vector<compiler::TensorType>& param_types() const { return param_types_; }
  // The memory each output lands in and the memory kind of each parameter
  // on the first device: what the program's `mhlo.memory_kind` attributes
  // name, else "device". memory_on() gives the same kind on another device.
  const std::vector<Memory*>& output_memories() const { return output_memories_; }
  const std::vector<Memory*>& param_memories() const { return param_memories_; }
  const compiler::Plan& plan() const { return *plan_; }

  struct Result {
    std::vector<BufferPtr> outputs;
    EventPtr done;
  };
  // `args[k]`: the arguments of devices()[k] (one list per device of this
  // process); one Result per device. Throws INVALID_ARGUMENT for a
  // wrong list or argument count or type, an argument on another device or
  // a deleted (or donated) argument, FAILED_PRECONDITION for a deleted
  // executable. Arguments the program may donate (Function::donors) and the
  // caller does not list in `non_donatable` are deleted on return, as XLA
  // deletes a donated buffer: the run still reads them, then lets MLX reuse
  // their memory for an output.
  std::vector<Result> execute(const std::vector<std::vector<BufferPtr>>& args,
                              const std::vector<int64_t>& non_donatable = {});
  // Whether parameter i may be donated.
  bool donates(size_t i) const { return i < donors_.size() && donors_[i]; }

  void mark_deleted() { deleted_ = true; }
  bool is_deleted() const { return deleted_; }

 private:
  // Which logical devices each process holds, for collectives that cross
  // processes; INVALID_ARGUMENT unless every process holds as many.
  backend::ProcessLayout processes_layout() const;
  // Checks one device's arguments and returns its donated ones.
  std::vector<size_t> check_args(const std::vector<BufferPtr>& args, Device* device,
                                 const std::vector<int64_t>& non_donatable) const;
  // Posts logical device i's run (one of this process's); `collectives`
  // is null on one device.
  // `uses` holds its arguments until the run has read them.
  Result launch(size_t i, std::shared_ptr<std::vector<BufferUse>> uses,
                std::shared_ptr<backend::CollectiveRun> collectives);

  Client* client_;
  std::mutex* launch_mu_;
  int process_index_, process_count_;
  std::shared_ptr<const CompiledProgram> compiled_;
  std::shared_ptr<const compiler::Plan> plan_;
  // Every device of the assignment (other processes' too), and the logical
  // indices of this process's.
  std::vector<Device*> devices_, local_devices_;
  std::vector<int> local_;
  // Microseconds the last run took from eval dispatch to ready: short runs
  // are waited for on the executor when it has nothing else to do. Unknown
  // before the first run, which is handed to the completion thread.
  // One per device.
  std::vector<std::shared_ptr<std::atomic<int64_t>>> last_wait_us_;
  std::vector<compiler::TensorType> param_types_, output_types_;
  std::vector<bool> donors_;
  std::vector<Memory*> param_memories_, output_memories_;
  std::atomic<bool> deleted_{false};
};

}  // namespace pjrtx::runtime
