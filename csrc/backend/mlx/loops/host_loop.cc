#include "backend/mlx/loops/host_loop.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/loops/cxx_build.h"
#include "backend/mlx/loops/cxx_prelude.h"
#include "backend/mlx/loops/emit_cxx.h"
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
// eight loops on two cores; a loop holds no lock it waits on while it runs
// and waits for nothing (a loop with a collective or callback stays on MLX),
// so this cannot deadlock.
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
                              " bound=" + std::to_string(bound) + "/op";
  if (mode == LoopMode::kAuto && per_op > bound) {
    decide(inst, "mlx", "not latency-bound: " + figures);
    return std::nullopt;
  }
  if (std::string dir = env_string("PJRTX_DUMP_DIR"); !dir.empty()) {
    static std::atomic<int> seq{0};
    std::ofstream(dir + "/host_loop." + std::to_string(seq++) + ".cc") << "// " << inst.where() << "\n"
                                                                       << kCxxPrelude << "\n"
                                                                       << src->code;
  }
  BuiltLoop built;
  {
    ProfileScope span("compile", "host loop: build");
    built = build_loop(kCxxPrelude, src->code, src->symbol);
  }
  if (!built.fn) {
    decide(inst, "mlx", "the host compiler failed: " + built.error);
    return std::nullopt;
  }
  decide(inst, "host",
         (mode == LoopMode::kHost ? std::string("PJRTX_LOOPS=host ") : std::string("latency-bound ")) + figures +
             (built.cached ? " cached" : " compile_us=" + std::to_string(built.compile_us)));
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    shapes.push_back(to_mlx_shape(ctx.out(i).shape));
    dtypes.push_back(to_mlx(ctx.out(i).dtype));
  }
  auto captured = std::make_shared<const std::vector<compiler::ValueId>>(std::move(src->captured));
  auto in_code = std::make_shared<const std::vector<bool>>(std::move(src->operand_in_code));
  HostLoopFn fn = built.fn;
  std::string loc = inst.where();
  return Kernel([fn, captured, in_code, shapes, dtypes, loc](RunState& st, const Arrays& in) -> Arrays {
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
    return host_kernel("pjrtx_host_loop", ins, shapes, dtypes, [fn, loc](const Arrays& i, Arrays& o) {
      CoreSlot slot;
      ProfileScope span("run", "host loop");
      std::vector<const void*> ip(i.size());
      std::vector<void*> op(o.size());
      for (size_t k = 0; k < i.size(); ++k) ip[k] = i[k].data<void>();
      for (size_t k = 0; k < o.size(); ++k) op[k] = o[k].data<void>();
      if (fn(ip.data(), op.data()) != 0)
        throw std::runtime_error("pjrtx: " + loc + ": the host loop ran out of memory");
    }, HostRun::kNowIfReady);
  });
}

}  // namespace pjrtx::backend::loops
