#include "backend/mlx/loops/host_loop.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host_callback.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/loops/cxx_build.h"
#include "backend/mlx/loops/cxx_prelude.h"
#include "backend/mlx/loops/emit_cxx.h"
#include "backend/mlx/loops/linalg_text.h"
#include "common/env.h"
#include "common/error.h"
#include "common/profile.h"
#include "common/trace.h"

namespace pjrtx::backend::loops {

namespace {

// Elements per op and iteration up to which a loop is latency-bound
// (README, "Loops"): MLX's CPU device spends ~3-8 us per primitive, the
// host engine ~0.5-1 ns per element; a GPU spends more per launch and per
// predicate read.
int64_t work_bound(bool gpu) {
  std::string v = env_string("PJRTX_LOOP_WORK");
  if (!v.empty()) {
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (!end || *end || n < 0)
      invalid_argument("pjrtx: PJRTX_LOOP_WORK must be a non-negative integer, got '", v, "'");
    return n;
  }
  return gpu ? 65536 : 8192;
}

// Host loops running at once, over every device of the process: at most one
// per core. Each device's executor has its own MLX CPU stream thread (MLX's
// default streams are per thread), so eight devices could otherwise run
// eight loops on two cores. A loop holds its core only while it computes: it
// gives it back while a host callback runs (call_callback), since the
// callable waits for the GIL and whatever holds the GIL may wait for a host
// loop; a loop with a collective stays on MLX. So this cannot deadlock.
class CoreSlots {
 public:
  CoreSlots() : free_(std::max(1u, std::thread::hardware_concurrency())) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned free_;
};

CoreSlots& core_slots() {
  static auto* s = new CoreSlots();  // never destroyed: stream threads may outlive statics
  return *s;
}

struct CoreSlot {
  CoreSlot() { core_slots().acquire(); }
  ~CoreSlot() { core_slots().release(); }
  CoreSlot(const CoreSlot&) = delete;
  CoreSlot& operator=(const CoreSlot&) = delete;
};

// The callables a loop's code calls (LoopSource::callbacks), retained for
// the program's life as ops/callback.cc retains its one.
struct LoopCallbacks {
  std::vector<LoopCallback> list;
  std::vector<CallbackRef> refs;
  bool effect = false;  // any has side effects
};

// HostCalls::self for one run: the callables, and the error of the one that
// failed (rethrown after the code has unwound).
struct CallState {
  const LoopCallbacks* callbacks;
  std::exception_ptr error;
};

int call_callback(void* self, long k, const void* const* args, void* const* results) {
  auto* st = static_cast<CallState*>(self);
  try {
    const LoopCallback& cb = st->callbacks->list.at(static_cast<size_t>(k));
    std::vector<HostArray> a, r;
    for (size_t i = 0; i < cb.args.size(); ++i)
      a.push_back({const_cast<void*>(args[i]), cb.args[i].byte_size(), cb.args[i]});
    for (size_t i = 0; i < cb.results.size(); ++i)
      r.push_back({results[i], cb.results[i].byte_size(), cb.results[i]});
    core_slots().release();
    struct Reacquire {
      ~Reacquire() { core_slots().acquire(); }
    } again;
    run_host_callback(cb.id, a, r);
    return 0;
  } catch (...) {
    st->error = std::current_exception();
    return 1;
  }
}

// What a loop is built after: the prelude, then, for loops that factor or
// solve, the linalg kernels the op family's host kernels run
// (host/linalg_kernels.h). The first goes into each source as text; the
// second includes system headers and is precompiled once per machine
// (cxx_build.h).
const std::string& loop_prelude(bool linalg) {
  static const std::string* base = new std::string(kCxxPrelude);
  static const std::string* with_linalg = new std::string(std::string(kCxxPrelude) + kLinalgKernelsText);
  return linalg ? *with_linalg : *base;
}

void decide(const compiler::Instruction& inst, const char* where, const std::string& why) {
  if (trace_enabled()) trace(std::string("loop ") + where, 0, 0, why + " " + inst.loc);
  if (profile_enabled())
    profile_event("compile", std::string("loop placement: ") + where, profile_now_us(), 0,
                  {{"reason", why}, {"loc", inst.loc}});
}

}  // namespace

std::optional<Kernel> place_while(LowerCtx& ctx) {
  const compiler::Instruction& inst = ctx.inst();
  const LoopMode mode = ctx.loop_mode();
  if (mode == LoopMode::kMlx) {
    decide(inst, "mlx", "PJRTX_LOOPS=mlx");
    return std::nullopt;
  }
  std::string why;
  std::optional<LoopSource> src = emit_loop(ctx.plan(), inst, &why);
  if (!src) {
    decide(inst, "mlx", "the host engine lacks " + why);
    return std::nullopt;
  }
  const int64_t bound = work_bound(ctx.on_gpu());
  const int64_t per_op = src->work / std::max<int64_t>(src->ops, 1);
  const std::string figures = "work=" + std::to_string(src->work) + " ops=" + std::to_string(src->ops) +
                              " bound=" + std::to_string(bound) + "/op" +
                              (src->callbacks.empty() ? "" : " callbacks=" + std::to_string(src->callbacks.size()));
  if (mode == LoopMode::kAuto && per_op > bound) {
    decide(inst, "mlx", "not latency-bound: " + figures);
    return std::nullopt;
  }
  if (std::string dir = env_string("PJRTX_DUMP_DIR"); !dir.empty()) {
    static std::atomic<int> seq{0};
    std::ofstream(dir + "/host_loop." + std::to_string(seq++) + ".cc") << "// " << inst.where() << "\n"
                                                                       << loop_prelude(src->linalg) << "\n"
                                                                       << src->code;
  }
  BuiltLoop built;
  {
    ProfileScope span("compile", "host loop: build");
    built = build_loop(loop_prelude(src->linalg), src->code, src->symbol);
  }
  if (!built.fn) {
    // Forced onto the host, a loop the engine takes must build: a failure
    // is the engine's defect (or a missing compiler), reported, never
    // hidden by a silent fall back that only runs slower.
    if (mode == LoopMode::kHost)
      throw_error(ErrorCode::kFailedPrecondition,
                  "pjrtx: PJRTX_LOOPS=host puts this loop on the host, and its build failed: ", built.error);
    decide(inst, "mlx", "the host compiler failed: " + built.error);
    return std::nullopt;
  }
  decide(inst, "host",
         (mode == LoopMode::kHost ? std::string("PJRTX_LOOPS=host ") : std::string("latency-bound ")) + figures +
             (built.cached ? " cached" : " compile_us=" + std::to_string(built.compile_us)));
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    shapes.push_back(storage_shape(ctx.out(i)));  // c128: f64 pairs
    dtypes.push_back(to_mlx(ctx.out(i).dtype));
  }
  auto captured = std::make_shared<const std::vector<compiler::ValueId>>(std::move(src->captured));
  auto in_code = std::make_shared<const std::vector<bool>>(std::move(src->operand_in_code));
  auto callbacks = std::make_shared<LoopCallbacks>();
  for (const LoopCallback& cb : src->callbacks) {
    callbacks->refs.push_back(retain_callback(cb.id));
    callbacks->effect = callbacks->effect || cb.effect;
  }
  callbacks->list = std::move(src->callbacks);
  // A loop that calls back into Python runs as a node on MLX's CPU stream,
  // where every other host callback runs; a loop with side effects also
  // takes the run's previous effect and becomes the next (ops/callback.cc),
  // so its callbacks run in program order with the others.
  const HostRun how = callbacks->list.empty() ? HostRun::kNowIfReady : HostRun::kOnStream;
  if (callbacks->effect) {
    shapes.push_back({});
    dtypes.push_back(mx::bool_);
  }
  HostLoopFn fn = built.fn;
  std::string loc = inst.where();
  return Kernel([fn, captured, in_code, shapes, dtypes, loc, callbacks, how](RunState& st,
                                                                             const Arrays& in) -> Arrays {
    if (st.batched)
      unimplemented("pjrtx: ", loc, " runs on the host (PJRTX_LOOPS) inside a batched region; set PJRTX_LOOPS=mlx");
    Arrays ins;
    for (size_t k = 0; k < in.size(); ++k)
      if (k >= in_code->size() || !(*in_code)[k]) ins.push_back(in[k]);
    for (compiler::ValueId v : *captured) {
      if (v < 0 || static_cast<size_t>(v) >= st.slots.size() || !st.slots[v])
        throw_error(ErrorCode::kInternal, "pjrtx: ", loc, ": host loop input %", v, " has no value");
      ins.push_back(*st.slots[v]);
    }
    // The previous effect is an input after the code's own (it reads
    // in[0..n) only); the last output is then this loop's effect.
    if (callbacks->effect && !st.effects.empty()) ins.push_back(st.effects.back());
    Arrays outs = host_kernel("pjrtx_host_loop", ins, shapes, dtypes, [fn, loc, callbacks](const Arrays& i, Arrays& o) {
      CoreSlot slot;
      ProfileScope span("run", "host loop");
      std::vector<const void*> ip(i.size());
      std::vector<void*> op(o.size());
      for (size_t k = 0; k < i.size(); ++k) ip[k] = i[k].data<void>();
      for (size_t k = 0; k < o.size(); ++k) op[k] = o[k].data<void>();
      CallState calls_state{callbacks.get(), nullptr};
      const HostCalls calls{&call_callback, &calls_state};
      const int rc = fn(ip.data(), op.data(), &calls);
      if (rc == 2 && calls_state.error) std::rethrow_exception(calls_state.error);
      if (rc != 0) throw std::runtime_error("pjrtx: " + loc + ": the host loop ran out of memory");
      if (callbacks->effect) *o.back().data<bool>() = true;
    }, how);
    if (callbacks->effect) {
      st.effects.push_back(outs.back());
      outs.pop_back();
    }
    return outs;
  });
}

}  // namespace pjrtx::backend::loops
