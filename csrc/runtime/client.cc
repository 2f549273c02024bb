#include "runtime/client.h"

#include <chrono>
#include <cstdint>
#include <future>
#include <thread>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include <mlx/array.h>

#include "backend/mlx/mlx_device.h"
#include "backend/mlx/host_callback.h"
#include "backend/mlx/process_group.h"
#include "backend/mlx/program.h"
#include "backend/mlx/transfer.h"
#include "compiler/printer.h"
#include "compiler/verifier.h"
#include "common/env.h"
#include "runtime/executable.h"
#include "common/profile.h"
#include "runtime/sha256.h"
#include "common/trace.h"

#ifndef PJRTX_VERSION
#define PJRTX_VERSION "dev"
#endif

namespace {
// Build systems that know no project version define PJRTX_VERSION as "".
const char* pjrtx_version() { return PJRTX_VERSION[0] != '\0' ? PJRTX_VERSION : "dev"; }
}  // namespace

namespace pjrtx::runtime {

namespace {
std::mutex g_frontend_mu;
FrontendFn& frontend() {
  static FrontendFn* fn = new FrontendFn();
  return *fn;
}
}  // namespace

void set_frontend(FrontendFn fn) {
  std::lock_guard<std::mutex> lock(g_frontend_mu);
  frontend() = std::move(fn);
}

namespace {
// Live clients, so jax.clear_caches() can empty their executable caches.
std::mutex g_clients_mu;
std::set<Client*>& live_clients() {
  static std::set<Client*> clients;
  return clients;
}
}  // namespace

void clear_compile_caches() {
  std::lock_guard<std::mutex> lock(g_clients_mu);
  for (Client* c : live_clients()) c->clear_compile_cache();
}

Client::Client(const ProcessOptions& options) {
  {
    std::lock_guard<std::mutex> lock(g_clients_mu);
    live_clients().insert(this);
  }
  backend::DeviceChoice choice = backend::choose_device(env_string("PJRTX_DEVICE"));
  // JAX's test utilities look for "cuda"/"rocm" in this string: keep them out.
  std::string label = choice.backend == "CUDA" ? "NVIDIA GPU" : choice.backend;
  platform_version_ = std::string("pjrtx ") + pjrtx_version() + " (MLX " + backend::mlx_version() +
                      ", " + label + ")";
  std::string kind = "MLX " + choice.backend;
  lower_options_.gpu = choice.is_gpu();
  std::string f64 = env_string("PJRTX_F64");
  if (f64 != "cpu" && f64 != "error")
    invalid_argument("pjrtx: PJRTX_F64 must be 'cpu' or 'error', got '", f64, "'");
  lower_options_.f64_error = f64 == "error";
  backend_ = choice.backend;
  const std::string count = env_string("PJRTX_DEVICES");
  int n = 0;
  try {
    size_t used = 0;
    n = std::stoi(count, &used);
    if (used != count.size()) n = 0;
  } catch (const std::exception&) {
    n = 0;
  }
  // XLA:CPU allows 2048 host devices per process; each pjrtx device is two
  // threads, so 1024 is far beyond anything useful and still safe to start.
  if (n < 1 || n > 1024)
    invalid_argument("pjrtx: PJRTX_DEVICES must be a whole number from 1 to 1024, got '", count,
                     "'");
  if (options.num_nodes < 1 || options.node_id < 0 || options.node_id >= options.num_nodes)
    invalid_argument("pjrtx: process ", options.node_id, " of ", options.num_nodes,
                     " (jax.distributed's process_id must be in 0..num_processes-1)");
  process_index_ = options.node_id;
  process_count_ = options.num_nodes;
  // Every process's device count and kind; ids run over the processes in
  // order (process p's devices follow process p-1's).
  std::vector<PeerInfo> peers(1, PeerInfo{n, kind, "", ""});
  if (process_count_ > 1) {
    distributed_backend_ = env_string("PJRTX_DISTRIBUTED");
    peers = exchange_peer_info(options, local_peer_info(n, kind));
    for (int p = 0; p < process_count_; ++p)
      if (peers[p].local_devices != n || peers[p].kind != kind)
        invalid_argument("pjrtx: process ", p, " has ", peers[p].local_devices, " x ",
                         peers[p].kind, " devices and process ", process_index_, " has ", n,
                         " x ", kind, "; every process needs the same PJRTX_DEVICES and "
                         "PJRTX_DEVICE");
    backend::ProcessGroupConfig config;
    config.backend = distributed_backend_;
    config.rank = process_index_;
    config.size = process_count_;
    config.hostfile_json = ring_hostfile(peers);
    backend::join_processes(config);
  }
  int next_id = 0;
  for (int p = 0; p < process_count_; ++p)
    for (int i = 0; i < peers[p].local_devices; ++i) {
      Executor* ex = nullptr;
      if (p == process_index_) {
        executors_.push_back(std::make_unique<Executor>(choice, i));
        ex = executors_.back().get();
      }
      devices_.push_back(std::make_unique<Device>(next_id++, this, kind, ex, p, i));
    }
  for (auto& d : devices_) {
    device_ptrs_.push_back(d.get());
    if (!d->is_addressable()) continue;
    local_ptrs_.push_back(d.get());
    for (Memory* m : d->memories()) memory_ptrs_.push_back(m);
  }
}

Client::~Client() {
  {
    std::lock_guard<std::mutex> lock(g_clients_mu);
    live_clients().erase(this);
  }
  // Cached programs hold MLX arrays (constants); free them while the
  // executor still runs, as when jaxlib destroys its executables first.
  cache_.clear();
  executors_.clear();  // drains and joins the MLX threads
}

Client::MemoryStats Client::memory_stats() const {
  backend::MemoryStats s = backend::memory_stats();
  return {s.in_use, s.peak, s.limit};
}

Device* Client::lookup_device(int id) const {
  for (Device* d : device_ptrs_)
    if (d->id() == id) return d;
  invalid_argument("pjrtx: no device with id ", id, " (this client has ", device_ptrs_.size(),
                   " device(s), ids 0..", device_ptrs_.size() - 1, "; PJRTX_DEVICES sets how many)");
}

DeviceAssignment Client::default_assignment(int num_replicas, int num_partitions) const {
  if (num_replicas < 1 || num_partitions < 1)
    invalid_argument("pjrtx: ", num_replicas, " replicas x ", num_partitions, " partitions");
  const int64_t n = int64_t{num_replicas} * num_partitions;
  if (n > static_cast<int64_t>(device_ptrs_.size()))
    invalid_argument("pjrtx: ", num_replicas, " replicas x ", num_partitions, " partitions need ",
                     n, " devices; this client has ", device_ptrs_.size(),
                     " (set PJRTX_DEVICES before JAX starts)");
  DeviceAssignment a;
  a.num_replicas = num_replicas;
  a.num_partitions = num_partitions;
  for (int64_t i = 0; i < n; ++i) a.device_ids.push_back(device_ptrs_[i]->id());
  return a;
}

DeviceAssignment Client::checked(DeviceAssignment a) const {
  if (a.device_ids.empty()) {
    if (a.num_devices() != 1) {
      DeviceAssignment d = default_assignment(a.num_replicas, a.num_partitions);
      d.open_params = std::move(a.open_params);
      return d;
    }
    a.device_ids = {local_ptrs_.front()->id()};
  }
  if (static_cast<int>(a.device_ids.size()) != a.num_devices())
    invalid_argument("pjrtx: a device assignment of ", a.device_ids.size(), " devices for ",
                     a.num_replicas, " replicas x ", a.num_partitions, " partitions");
  std::set<int> seen;
  for (int id : a.device_ids) {
    lookup_device(id);
    if (!seen.insert(id).second)
      invalid_argument("pjrtx: the device assignment names device ", id, " twice");
  }
  return a;
}

BufferPtr Client::buffer_from_host(const void* data, const compiler::TensorType& type,
                                   const int64_t* byte_strides, Memory* memory) {
  Stopwatch sw;
  ProfileScope prof("transfer", "h2d");
  if (prof.active()) {
    prof.set_name("h2d " + type.str());
    prof.arg("bytes", type.byte_size());
  }
  // The copy happens here, so the caller's memory is free on return.
  mx::array a = backend::array_from_host(data, type, byte_strides);
  auto buf = std::make_shared<Buffer>(type, memory, Event::create());
  buf->set_array(std::move(a));
  buf->ready_event()->set_ready();
  if (trace_enabled()) trace("h2d " + type.str(), type.byte_size(), sw.us());
  return buf;
}

BufferPtr Client::copy_buffer(const BufferPtr& src, Memory* memory) {
  auto out = std::make_shared<Buffer>(src->type(), memory, Event::create());
  auto use = std::make_shared<BufferUse>(src, "copy");
  Executor& from = src->device()->executor();
  Executor& to = memory->device()->executor();
  if (&from == &to) {
    // Ordered after whatever produces `src` (the executor runs tasks in
    // order); arrays are immutable, so the copy shares them.
    from.post([use, out] {
      try {
        out->set_array(use->buffer()->array_for_use());
        out->ready_event()->set_ready();
      } catch (const Error& e) {
        out->ready_event()->set_error(std::make_shared<const Error>(e));
      }
    });
    return out;
  }
  // Another device: its own storage (buffers of two devices never share it,
  // so donating one cannot touch the other), copied on the destination's
  // executor, in its order (work posted there later may read the copy),
  // after waiting for the source (an unevaluated array belongs to the
  // source device's thread and streams). The wait cannot deadlock: a run
  // that produces `src` and spans the destination too was posted to both
  // executors before this task.
  to.post([use, out] {
    try {
      if (ErrorPtr err = use->buffer()->ready_event()->await()) {
        out->ready_event()->set_error(err);
        return;
      }
      out->set_array(backend::copy_to_own_storage(use->buffer()->array_for_use()));
      out->ready_event()->set_ready();
    } catch (const Error& e) {
      out->ready_event()->set_error(std::make_shared<const Error>(e));
    } catch (const std::exception& e) {
      out->ready_event()->set_error(std::make_shared<const Error>(
          ErrorCode::kInternal, std::string("pjrtx: copy between devices: ") + e.what()));
    }
  });
  return out;
}

EventPtr Client::to_host(const BufferPtr& buffer, void* dst, size_t dst_size) {
  auto done = Event::create();
  auto use = std::make_shared<BufferUse>(buffer, "device-to-host");
  buffer->device()->executor().post([buffer, use, dst, dst_size, done] {
    Stopwatch sw;
    ProfileScope prof("transfer", "d2h");
    if (prof.active()) {
      prof.set_name("d2h " + buffer->type().str());
      prof.arg("bytes", static_cast<int64_t>(dst_size));
    }
    try {
      backend::array_to_host(use->buffer()->array_for_use(), buffer->type().dtype, dst, dst_size);
      done->set_ready();
    } catch (const Error& e) {
      done->set_error(std::make_shared<const Error>(e));
    } catch (const std::exception& e) {
      done->set_error(std::make_shared<const Error>(ErrorCode::kInternal,
                                                    std::string("pjrtx: device-to-host: ") + e.what()));
    }
    if (trace_enabled()) trace("d2h " + buffer->type().str(), dst_size, sw.us());
  });
  return done;
}

uintptr_t Client::unsafe_pointer(const BufferPtr& buffer) {
  // How NumPy reads a host-readable buffer (np.asarray): a zero-copy view,
  // after waiting for the value (and a contiguous copy if it is a view).
  ProfileScope prof("transfer", "d2h view");
  if (prof.active()) {
    prof.set_name("d2h view " + buffer->type().str());
    prof.arg("bytes", buffer->type().byte_size());
  }
  BufferUse use(buffer, "unsafe_buffer_pointer");
  if (ErrorPtr err = buffer->ready_event()->await()) throw *err;
  return buffer->device()->executor().run_sync([&] {
    mx::array a = use.buffer()->array_for_use();
    mx::array m = backend::materialized(a);
    // A view gets its contiguous copy for good, so the address stays valid
    // and the same for the buffer's lifetime.
    if (m.id() != a.id()) use.buffer()->replace_array(m);
    return backend::array_address(m);
  });
}

uintptr_t Client::acquire_external(const BufferPtr& buffer) {
  uintptr_t address = unsafe_pointer(buffer);
  // unsafe_pointer left the buffer holding its contiguous, evaluated array.
  buffer->add_external_ref(buffer->array());
  return address;
}

bool Client::host_readable(const Buffer& buffer) const {
  compiler::DType t = buffer.type().dtype;
  return backend_name() == "CPU" && !compiler::is_subbyte_int(t) && t != compiler::DType::kF4E2M1FN &&
         t != compiler::DType::kToken && buffer.type().byte_size() > 0;
}

namespace {

void dump(const std::string& dir, const compiler::Plan& plan, const std::string& mlir) {
  static std::atomic<int> counter{0};
  int n = counter++;
  std::filesystem::create_directories(dir);
  std::string base = dir + "/" + std::to_string(n) + "." + (plan.name.empty() ? "module" : plan.name);
  std::ofstream(base + ".mlir") << mlir;
  std::ofstream(base + ".plan.txt") << compiler::print_plan(plan);
}

// Bytes of `t`, saturating instead of overflowing int64.
int64_t checked_bytes(const compiler::TensorType& t) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t n = compiler::dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d == 0) return 0;
    n = n > kMax / d ? kMax : n * d;
  }
  return n;
}

// MLX's CPU allocator does not fail on a malloc it cannot serve: the kernel
// then writes through a null pointer on an MLX worker thread and the process
// dies (f32[16777216,16777216] segfaults on a 23 GiB machine). A value larger
// than the whole device memory limit cannot be evaluated anyway, so refuse
// such a program here, naming the op, while it is still a Python error.
void check_value_sizes(const compiler::Region& r, const compiler::Plan& plan, int64_t limit,
                       const std::string& backend) {
  auto check = [&](compiler::ValueId v, const std::string& where) {
    const auto& t = plan.type(v);
    int64_t bytes = checked_bytes(t);
    if (bytes > limit)
      invalid_argument("[", where, "] pjrtx: ", t.str(), " needs ", bytes,
                       " bytes, more than the MLX ", backend, " memory limit of ", limit,
                       " bytes");
  };
  for (compiler::ValueId v : r.params) check(v, "parameter");
  for (const compiler::Instruction& inst : r.body) {
    for (compiler::ValueId v : inst.results) check(v, inst.where());
    for (const auto& sub : inst.regions) check_value_sizes(sub, plan, limit, backend);
  }
}

}  // namespace

// The key covers the bytes and everything else the result depends on: the
// pjrtx build (its frontend and lowerings), the MLX device and the lowering
// options, and every PJRTX_* variable (so one read while lowering, such as
// a compile mode, cannot serve a stale program), and the device assignment
// (replica and partition counts and device ids: the lowerings differ per
// device). pjrtx reads nothing else of the compile options.
std::string Client::cache_key(std::string_view kind, std::string_view format,
                              std::string_view bytes, const DeviceAssignment& assignment) const {
  Sha256 h;
  h.update_field(kind).update_field(platform_version_).update_field(backend_name());
  h.update_field(std::to_string(assignment.num_replicas) + "x" +
                 std::to_string(assignment.num_partitions));
  for (int id : assignment.device_ids) h.update_field(std::to_string(id));
  std::string open;
  for (bool b : assignment.open_params) open.push_back(b ? '1' : '0');
  h.update_field(open);
  h.update_field(lower_options_.gpu ? "gpu" : "cpu");
  h.update_field(lower_options_.f64_error ? "f64=error" : "f64=cpu");
  for (const EnvVar& v : env_vars()) h.update_field(v.name).update_field(env_string(v.name));
  h.update_field(format).update_field(bytes);
  return h.hex_digest();
}

std::shared_ptr<const CompiledProgram> Client::lower(std::shared_ptr<const compiler::Plan> plan,
                                                     std::string fingerprint,
                                                     const DeviceAssignment& assignment) {
  if (int64_t limit = memory_stats().limit; limit > 0) {
    ProfileScope phase("compile", "check value sizes");
    for (const auto& f : plan->functions) check_value_sizes(f.body, *plan, limit, backend_name());
  }
  // Lowering runs on the executor, which waits inside a run while a host
  // callback executes. jaxlib compiles on a worker thread, so a callback
  // that compiles (e.g. jnp on its NumPy inputs, with pjrtx the default
  // backend) would wait for itself: give a running callback 2 s to finish
  // (an unrelated thread's compile), then refuse instead of hanging.
  for (int i = 0; i < 2000 && backend::host_callback_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (backend::host_callback_running())
    failed_precondition("pjrtx: cannot compile ", plan->name,
                        " while a host callback runs (the pjrtx executor waits for the callback); "
                        "inside a callback, compute with NumPy or on jax.devices('cpu')");
  // Read per compile, so a process can compile one program with another
  // tier (cache_key covers every PJRTX_* variable, this one included).
  backend::LowerOptions options = lower_options_;
  std::string tier = env_string("PJRTX_COMPILE");
  if (tier == "never") options.compile_tier = backend::CompileTier::kNever;
  else if (tier == "auto") options.compile_tier = backend::CompileTier::kAuto;
  else if (tier == "always") options.compile_tier = backend::CompileTier::kAlways;
  else invalid_argument("pjrtx: PJRTX_COMPILE must be 'never', 'auto' or 'always', got '", tier, "'");
  std::string host = env_string("PJRTX_HOST");
  if (host == "all") options.host = backend::HostMode::kAll;
  else if (host == "int") options.host = backend::HostMode::kInt;
  else if (host == "off") options.host = backend::HostMode::kOff;
  else invalid_argument("pjrtx: PJRTX_HOST must be 'all', 'int' or 'off', got '", host, "'");
  const int n = assignment.num_devices();
  std::vector<std::shared_ptr<backend::Program>> programs(n);
  {
    // Measured here, on the compiling thread: it includes the wait for the
    // executors, which run the lowerings (and fold constants) at once, each
    // for its own device.
    ProfileScope phase("compile", "lower to MLX");
    std::vector<std::future<std::shared_ptr<backend::Program>>> pending;
    // Another process's devices lower their own copies there.
    std::vector<int> local;
    for (int i = 0; i < n; ++i)
      if (lookup_device(assignment.device_ids[i])->is_addressable()) local.push_back(i);
    // A program only for other processes' devices (XLA allows it: this
    // process gets arrays with no addressable shards) lowers nothing here.
    for (int i : local) {
      backend::LowerOptions o = options;
      o.device = {i / assignment.num_partitions, i % assignment.num_partitions,
                  assignment.num_replicas, assignment.num_partitions};
      o.device.spans_processes = static_cast<int>(local.size()) != n;
      Executor& ex = lookup_device(assignment.device_ids[i])->executor();
      auto task = std::make_shared<std::packaged_task<std::shared_ptr<backend::Program>()>>(
          [plan, o] { return backend::Program::lower(plan, o); });
      pending.push_back(task->get_future());
      ex.post([task] { (*task)(); });
    }
    std::exception_ptr first;
    for (size_t k = 0; k < local.size(); ++k) {
      const int i = local[k];
      try {
        programs[i] = pending[k].get();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }
  register_plan(fingerprint, plan);
  return std::make_shared<const CompiledProgram>(CompiledProgram{
      std::move(plan), std::move(programs), std::move(fingerprint), assignment});
}

std::shared_ptr<LoadedExecutable> Client::compile(std::string_view code, std::string_view format,
                                                  DeviceAssignment assignment) {
  Stopwatch sw;
  ProfileScope prof("compile", "compile");
  prof.arg("code_bytes", static_cast<int64_t>(code.size()));
  assignment = checked(std::move(assignment));
  std::string key = cache_key("compile", format, code, assignment);
  std::shared_ptr<const CompiledProgram> compiled = cache_.find(key);
  bool hit = compiled != nullptr;
  if (hit) {
    count_cache_hit();
  } else {
    FrontendFn fn;
    {
      std::lock_guard<std::mutex> lock(g_frontend_mu);
      fn = frontend();
    }
    if (!fn)
      failed_precondition("pjrtx: the Python frontend is not registered (import pjrtx first)");
    std::string dump_dir = env_string("PJRTX_DUMP_DIR");
    std::string mlir_text;
    std::shared_ptr<const compiler::Plan> plan;
    {
      ProfileScope phase("compile", "frontend (parse, plan)");
      plan = std::make_shared<const compiler::Plan>(
          fn(code, format, assignment.open_params, dump_dir.empty() ? nullptr : &mlir_text));
    }
    count_frontend_run();
    if (!dump_dir.empty()) dump(dump_dir, *plan, mlir_text);
    compiled = lower(std::move(plan), key, assignment);
    cache_.insert(key, compiled);
  }
  auto exe = std::make_shared<LoadedExecutable>(link(*compiled), compiled);
  if (prof.active()) {
    prof.set_name(std::string(hit ? "compile (cached) " : "compile ") + compiled->plan->name);
    prof.arg("instructions", static_cast<int64_t>(compiled->plan->num_instructions()));
  }
  if (trace_enabled())
    trace(std::string(hit ? "compile (cached) " : "compile ") + compiled->plan->name,
          static_cast<int64_t>(code.size()), sw.us(),
          "instructions=" + std::to_string(compiled->plan->num_instructions()));
  return exe;
}

ClientLink Client::link(const CompiledProgram& compiled) {
  ClientLink l;
  l.client = this;
  for (int id : compiled.assignment.device_ids) l.devices.push_back(lookup_device(id));
  l.launch_mu = &launch_mu_;
  l.process_index = process_index_;
  l.process_count = process_count_;
  return l;
}

std::string Client::serialize(const LoadedExecutable& exe) const {
  count_serialized();
  return pack_executable(exe.fingerprint(), exe.plan(), exe.assignment());
}

std::shared_ptr<LoadedExecutable> Client::deserialize(std::string_view bytes,
                                                      DeviceAssignment assignment) {
  Stopwatch sw;
  ProfileScope prof("compile", "deserialize");
  UnpackedExecutable u = unpack_executable(bytes);
  // Options that name devices (jaxlib's overriding compile options) win
  // over the ones serialized with the program.
  assignment = checked(assignment.device_ids.empty() && assignment.num_devices() == 1
                           ? u.assignment
                           : assignment);
  // Loading the same bytes twice (JAX's cache read in two jit wrappers)
  // reuses the first load, as compile does.
  std::string key = cache_key("deserialize", "", bytes, assignment);
  std::shared_ptr<const CompiledProgram> compiled = cache_.find(key);
  if (!compiled) {
    compiler::verify(u.plan);
    compiled = lower(std::make_shared<const compiler::Plan>(std::move(u.plan)), u.fingerprint,
                     assignment);
    cache_.insert(key, compiled);
  }
  count_deserialized();
  auto exe = std::make_shared<LoadedExecutable>(link(*compiled), compiled);
  if (trace_enabled())
    trace("deserialize " + compiled->plan->name, static_cast<int64_t>(bytes.size()), sw.us(),
          "instructions=" + std::to_string(compiled->plan->num_instructions()));
  return exe;
}

}  // namespace pjrtx::runtime
