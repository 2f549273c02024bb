#include "runtime/executable.h"

#include <algorithm>
#include <cstdint>

#include "backend/mlx/async_eval.h"
#include "backend/mlx/collective_run.h"
#include "backend/mlx/mlx_device.h"
#include "backend/mlx/graph_stats.h"
#include "backend/mlx/program.h"
#include "backend/mlx/transfer.h"

#include "common/env.h"
#include "common/profile.h"
#include "common/spin.h"
#include "common/trace.h"
#include "runtime/executor.h"

namespace pjrtx::runtime {

namespace {
// PJRTX_COLLECTIVE_TIMEOUT_S, read once.
std::chrono::milliseconds collective_timeout() {
  static const std::chrono::milliseconds t = [] {
    const std::string v = env_string("PJRTX_COLLECTIVE_TIMEOUT_S");
    double seconds = 0;
    try {
      size_t used = 0;
      seconds = std::stod(v, &used);
      if (used != v.size()) seconds = 0;
    } catch (const std::exception&) {
      seconds = 0;
    }
    if (!(seconds > 0))
      invalid_argument("pjrtx: PJRTX_COLLECTIVE_TIMEOUT_S must be a positive number of seconds, "
                       "got '", v, "'");
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }();
  return t;
}
}  // namespace

LoadedExecutable::LoadedExecutable(ClientLink link, std::shared_ptr<const CompiledProgram> compiled)
    : client_(link.client),
      launch_mu_(link.launch_mu),
      process_index_(link.process_index),
      process_count_(link.process_count),
      compiled_(std::move(compiled)),
      plan_(compiled_->plan) {
  const auto& f = plan_->entry_function();
  for (auto v : f.body.params) param_types_.push_back(plan_->type(v));
  output_types_ = f.result_types;
  donors_ = f.donors;
  for (Device* d : link.devices) {
    devices_.push_back(d);
    last_wait_us_.push_back(std::make_shared<std::atomic<int64_t>>(int64_t{1} << 40));
    if (devices_.back()->is_addressable()) {
      local_.push_back(static_cast<int>(devices_.size()) - 1);
      local_devices_.push_back(devices_.back());
    }
  }
  // Memory kinds from this process's first device (any device when the
  // program runs only on other processes').
  Device* device = local_devices_.empty() ? devices_.front() : local_devices_.front();
  auto kind = [](const std::vector<std::string>& kinds, size_t i) {
    return i < kinds.size() ? std::string_view(kinds[i]) : std::string_view();
  };
  for (size_t i = 0; i < param_types_.size(); ++i)
    param_memories_.push_back(device->memory(kind(f.arg_memory_kinds, i)));
  for (size_t i = 0; i < output_types_.size(); ++i)
    output_memories_.push_back(device->memory(kind(f.result_memory_kinds, i)));
}

// The program's MLX arrays (constants) are plain data or views of it;
// runs in flight hold their own references, so dropping ours on this thread
// is safe even while the executor uses them.
LoadedExecutable::~LoadedExecutable() = default;

std::vector<size_t> LoadedExecutable::check_args(const std::vector<BufferPtr>& args,
                                                 Device* device,
                                                 const std::vector<int64_t>& non_donatable) const {
  if (args.size() != param_types_.size())
    invalid_argument("pjrtx: ", name(), " takes ", param_types_.size(), " arguments, got ",
                     args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]) invalid_argument("pjrtx: ", name(), " argument ", i, " is null");
    // INVALID_ARGUMENT and this wording as XLA's own clients: JAX's tests
    // match "Buffer has been deleted".
    if (args[i]->is_deleted())
      invalid_argument("pjrtx: ", name(), " argument ", i, " (", args[i]->type().str(),
                       "): Buffer has been deleted or donated");
    // jaxlib passes a token argument as a pred[0] buffer.
    bool token_arg = param_types_[i].dtype == compiler::DType::kToken &&
                     args[i]->type().dtype == compiler::DType::kPred;
    if (args[i]->type() != param_types_[i] && !token_arg)
      invalid_argument("pjrtx: ", name(), " argument ", i, " is ", args[i]->type().str(),
                       " but the program expects ", param_types_[i].str());
    // An unevaluated array belongs to its device's executor thread.
    if (args[i]->device() != device)
      invalid_argument("pjrtx: ", name(), " argument ", i, " is on ",
                       args[i]->device()->to_string(), " but this run is on ",
                       device->to_string(), " (copy it there first)");
  }
  std::vector<size_t> donated;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!donates(i)) continue;
    bool kept = false;
    for (int64_t k : non_donatable) kept |= k == static_cast<int64_t>(i);
    if (!kept) donated.push_back(i);
  }
  // A buffer donated and also passed elsewhere would be overwritten while
  // the other argument still reads it; XLA refuses `f(donate(a), a)` too.
  for (size_t i : donated)
    for (size_t j = 0; j < args.size(); ++j)
      if (j != i && args[j] == args[i])
        invalid_argument("pjrtx: ", name(), ": Attempt to use a buffer that was previously "
                         "donated in the same call to Execute() (flattened argument ",
                         std::max(i, j), ", first use: ", std::min(i, j), ")");
  return donated;
}

std::vector<LoadedExecutable::Result> LoadedExecutable::execute(
    const std::vector<std::vector<BufferPtr>>& args, const std::vector<int64_t>& non_donatable) {
  if (deleted_) failed_precondition("pjrtx: executable ", name(), " was deleted");
  if (args.size() != local_.size())
    invalid_argument("pjrtx: ", name(), " runs on ", local_.size(), " device(s) of this process",
                     devices_.size() != local_.size()
                         ? " (" + std::to_string(devices_.size()) + " in all)"
                         : std::string(),
                     ", got ", args.size(), " argument lists");
  std::vector<std::vector<size_t>> donated;
  for (size_t d = 0; d < args.size(); ++d)
    donated.push_back(check_args(args[d], local_devices_[d], non_donatable));
  // Donated arguments are deleted now (JAX then raises its "donated buffer"
  // errors on a later use); each run holds a use that keeps the data for
  // that run only (see launch).
  std::vector<std::shared_ptr<std::vector<BufferUse>>> uses;
  for (size_t d = 0; d < args.size(); ++d) {
    auto u = std::make_shared<std::vector<BufferUse>>();
    u->reserve(args[d].size());
    for (const auto& a : args[d]) u->emplace_back(a, "execute");
    uses.push_back(std::move(u));
  }
  for (size_t d = 0; d < args.size(); ++d)
    for (size_t i : donated[d]) args[d][i]->mark_deleted();
  std::vector<Result> results;
  if (local_.empty()) return results;  // only other processes' devices run it
  if (devices_.size() == 1) {
    results.push_back(launch(0, std::move(uses[0]), nullptr));
  } else {
    auto collectives = std::make_shared<backend::CollectiveRun>(collective_timeout());
    if (local_.size() != devices_.size()) collectives->span_processes(processes_layout());
    // Every multi-device run of the client is posted to all its devices in
    // one order: two runs posted in different orders on two devices would
    // each wait in a collective for the other.
    std::lock_guard<std::mutex> lock(*launch_mu_);
    for (size_t k = 0; k < local_.size(); ++k)
      results.push_back(launch(local_[k], std::move(uses[k]), collectives));
  }
  // A program that calls Python back runs to completion before Execute
  // returns, as XLA:CPU runs it: an exception in a callback then raises
  // from the jitted call itself rather than from a later read or from every
  // later jax.effects_barrier() (JAX keeps the failed run's token). jaxlib
  // calls Execute without the GIL, so the callbacks can take it meanwhile.
  if (compiled_->programs[local_.front()]->calls_host())
    for (const auto& r : results)
      if (ErrorPtr err = r.done->await()) throw *err;
  return results;
}

backend::ProcessLayout LoadedExecutable::processes_layout() const {
  backend::ProcessLayout layout;
  layout.num_logical = static_cast<int>(devices_.size());
  layout.local = local_;
  std::vector<std::vector<int>> by_process(process_count_);
  for (size_t i = 0; i < devices_.size(); ++i)
    by_process.at(devices_[i]->process_index()).push_back(static_cast<int>(i));
  for (int p = 0; p < process_count_; ++p)
    if (by_process[p].size() != local_.size())
      invalid_argument("pjrtx: ", name(), " runs on ", by_process[p].size(), " device(s) of process ",
                       p, " and ", local_.size(), " of process ", process_index_,
                       ": a program that spans processes needs the same number of devices in "
                       "each of them (all of JAX's devices, as jax.devices() lists them)");
  for (const auto& ids : by_process) layout.rows.insert(layout.rows.end(), ids.begin(), ids.end());
  return layout;
}

LoadedExecutable::Result LoadedExecutable::launch(
    size_t index, std::shared_ptr<std::vector<BufferUse>> uses,
    std::shared_ptr<backend::CollectiveRun> collectives) {
  Device* device = devices_[index];
  Result result;
  result.done = Event::create();
  for (size_t i = 0; i < output_types_.size(); ++i)
    result.outputs.push_back(std::make_shared<Buffer>(
        output_types_[i], device->memory(output_memories_[i]->kind()), Event::create()));

  // `uses` moves into the task: a copy left here would keep a donated
  // argument's array alive past the point where the run drops it, whenever
  // the executor starts the task before execute() returns.
  const double posted_us = profile_enabled() ? profile_now_us() : 0;
  Executor* executor = &device->executor();
  // In flight until its completion is done with it (or its failure): what
  // runs free goes back to the system once they pause (mlx_device.h).
  auto token = std::make_shared<backend::RunToken>();
  executor->post([program = compiled_->programs[index], uses = std::move(uses),
                  outs = result.outputs, done = result.done, name = name(), executor, posted_us,
                  last_wait_us = last_wait_us_[index], collectives, token]() mutable {
    Stopwatch sw;
    const int64_t primitives_before = backend::primitives_evaluated();
    // queued (posted_us .. start) -> graph build -> eval dispatch here; the
    // wait for the evaluation -> ready is "ready NAME" on the completion
    // thread.
    ProfileScope prof("execute", "execute");
    if (prof.active()) {
      prof.set_name("execute " + name);
      prof.arg("executable", name);
      prof.arg("queued_us", static_cast<int64_t>(prof.start_us() - posted_us));
    }
    auto fail = [outs, done, name, collectives](const std::exception& e) {
      const auto* pe = dynamic_cast<const Error*>(&e);
      auto err = std::make_shared<const Error>(pe ? pe->code() : ErrorCode::kInternal,
                                               pe ? std::string(e.what())
                                                  : "[" + name + "] " + e.what());
      // The other devices would wait for this one in their next collective.
      if (collectives)
        collectives->abort("pjrtx: " + name + ": another device's run failed: " + err->what());
      for (auto& o : outs) o->ready_event()->set_error(err);
      done->set_error(err);
    };
    backend::PendingEval eval;
    try {
      backend::Arrays inputs;
      inputs.reserve(uses->size());
      std::vector<bool> donated;  // execute() marked the donated arguments deleted
      for (const auto& u : *uses) {
        inputs.push_back(u.buffer()->array_for_use());
        donated.push_back(u.buffer()->is_deleted());
      }
      uses.reset();  // the arrays in `inputs` keep the data alive from here
      backend::Arrays effects;
      backend::Arrays arrays;
      {
        ProfileScope phase("execute", "graph build");
        arrays = program->run(inputs, &effects, collectives.get());
        backend::unshare_outputs(arrays, inputs, donated);
        backend::alias_small_donated(arrays, inputs, donated, effects);
      }
      // The graph holds what it reads; our handles would keep a donated
      // input's use count above 1 and stop MLX from reusing its memory.
      inputs.clear();
      // Host callbacks with no results (debug.print) are effects: they run
      // before the outputs and `done` (jax.effects_barrier waits on it) are
      // ready.
      backend::Arrays pending = arrays;
      pending.insert(pending.end(), effects.begin(), effects.end());
      {
        ProfileScope phase("execute", "eval dispatch");
        eval = backend::eval_async(pending);
        if (!executor->device().is_gpu() && eval.queued())
          backend::keep_cpu_stream_warm(spin_us());
      }
      // Set now, ready later: the next call on this executor may read them
      // lazily (its graph then waits for this one inside MLX).
      for (size_t i = 0; i < outs.size(); ++i) outs[i]->set_array(std::move(arrays[i]));
    } catch (const std::exception& e) {
      fail(e);
      return;
    }
    const int64_t primitives = backend::primitives_evaluated() - primitives_before;
    if (prof.active()) {
      int64_t bytes = 0;
      for (const auto& o : outs) bytes += o->on_device_size();
      prof.arg("bytes", bytes);
      prof.arg("prims", primitives);
    }
    Stopwatch dispatched;
    auto finish = [eval = std::move(eval), outs = std::move(outs), done = std::move(done),
                   name = std::move(name), fail = std::move(fail), sw, primitives, dispatched,
                   last_wait_us, token = std::move(token)]() mutable {
      ProfileScope ready("execute", "ready");
      if (ready.active()) {
        ready.set_name("ready " + name);
        ready.arg("executable", name);
      }
      try {
        spin_until([&eval] { return eval.ready(); }, spin_us());
        eval.wait();
      } catch (const std::exception& e) {
        fail(e);
        return;
      }
      last_wait_us->store(static_cast<int64_t>(dispatched.us()));
      for (auto& o : outs) o->ready_event()->set_ready();
      done->set_ready();
      if (trace_enabled()) {
        int64_t bytes = 0;
        for (const auto& o : outs) bytes += o->on_device_size();
        trace("execute " + name, bytes, sw.us(), "prims=" + std::to_string(primitives));
      }
    };
    // A run that took under kInlineWaitUs last time is waited for here when
    // nothing else is queued: handing a 20 us wait to the completion thread
    // costs about as much as the wait. Longer runs keep the executor free to
    // build the next call's graph meanwhile.
    constexpr int64_t kInlineWaitUs = 200;
    if (last_wait_us->load() < kInlineWaitUs && executor->quiet())
      finish();
    else
      executor->complete(std::move(finish));
  });
  return result;
}

}  // namespace pjrtx::runtime
