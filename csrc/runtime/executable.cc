#include "runtime/executable.h"

#include <algorithm>

#include "backend/mlx/async_eval.h"
#include "backend/mlx/device.h"
#include "backend/mlx/graph_stats.h"
#include "backend/mlx/program.h"

#include "runtime/profile.h"
#include "runtime/spin.h"
#include "runtime/trace.h"

namespace pjrtx::runtime {

LoadedExecutable::LoadedExecutable(Client* client, std::shared_ptr<const compiler::Plan> plan,
                                   std::shared_ptr<backend::Program> program,
                                   std::string fingerprint)
    : client_(client),
      plan_(std::move(plan)),
      program_(std::move(program)),
      fingerprint_(std::move(fingerprint)) {
  const auto& f = plan_->entry_function();
  for (auto v : f.body.params) param_types_.push_back(plan_->type(v));
  output_types_ = f.result_types;
  donors_ = f.donors;
  Device* device = client_->devices().front();
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

LoadedExecutable::Result LoadedExecutable::execute(const std::vector<BufferPtr>& args,
                                                   const std::vector<int64_t>& non_donatable) {
  if (deleted_) failed_precondition("pjrtx: executable ", name(), " was deleted");
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
  }
  // Held until the run has read its inputs, so deleting an argument right
  // after dispatch does not take the data from this run. (shared_ptr:
  // std::function needs a copyable task.)
  auto uses = std::make_shared<std::vector<BufferUse>>();
  uses->reserve(args.size());
  for (const auto& a : args) uses->emplace_back(a, "execute");
  // Donated arguments are deleted now (JAX then raises its "donated buffer"
  // errors on a later use); the use taken above keeps the data for this run
  // only, and dropping that use on the executor leaves the run's graph as
  // the array's sole owner, which MLX needs to write an output in place
  // (array::is_donatable: use_count 1 of both descriptor and data).
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
  for (size_t i : donated) args[i]->mark_deleted();
  Result result;
  result.done = Event::create();
  for (size_t i = 0; i < output_types_.size(); ++i)
    result.outputs.push_back(
        std::make_shared<Buffer>(output_types_[i], output_memories_[i], Event::create()));

  // `uses` moves into the task: a copy left here would keep a donated
  // argument's array alive past the point where the run drops it, whenever
  // the executor starts the task before execute() returns.
  const double posted_us = profile_enabled() ? profile_now_us() : 0;
  Executor* executor = &client_->executor();
  executor->post([program = program_, uses = std::move(uses), outs = result.outputs,
                  done = result.done, name = name(), executor, posted_us,
                  last_wait_us = last_wait_us_]() mutable {
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
    auto fail = [outs, done, name](const std::exception& e) {
      const auto* pe = dynamic_cast<const Error*>(&e);
      auto err = std::make_shared<const Error>(pe ? pe->code() : ErrorCode::kInternal,
                                               pe ? std::string(e.what())
                                                  : "[" + name + "] " + e.what());
      for (auto& o : outs) o->ready_event()->set_error(err);
      done->set_error(err);
    };
    backend::PendingEval eval;
    try {
      backend::Arrays inputs;
      inputs.reserve(uses->size());
      for (const auto& u : *uses) inputs.push_back(u.buffer()->array_for_use());
      uses.reset();  // the arrays in `inputs` keep the data alive from here
      backend::Arrays effects;
      backend::Arrays arrays;
      {
        ProfileScope phase("execute", "graph build");
        arrays = program->run(inputs, &effects);
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
        if (executor->device().device == mlx::core::Device::cpu)
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
                   last_wait_us]() mutable {
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
  // A program that calls Python back runs to completion before Execute
  // returns, as XLA:CPU runs it: an exception in a callback then raises
  // from the jitted call itself rather than from a later read or from every
  // later jax.effects_barrier() (JAX keeps the failed run's token). jaxlib
  // calls Execute without the GIL, so the callbacks can take it meanwhile.
  if (program_->calls_host())
    if (ErrorPtr err = result.done->await()) throw *err;
  return result;
}

}  // namespace pjrtx::runtime
