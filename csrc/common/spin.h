// Bounded spinning before a blocking wait. Waking a thread parked on a
// futex costs 15-25 us on the 2-core VMs we measure on (an idle vCPU has to
// be woken by an interrupt), while a tiny jitted call does about 12 us of
// work: a call that blocked at each of its three hand-offs (caller ->
// executor -> MLX's stream -> caller) spent most of its time waking threads.
// Each hand-off therefore polls for a short while first, yielding the core
// to any runnable thread between polls, and only then blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace pjrtx {

// Microseconds a waiter polls before it blocks: PJRTX_SPIN_US (0 blocks at
// once). Read once.
int64_t spin_us();

// Polls `ready` until it holds or `us` microseconds have passed; returns
// whether it held.
template <typename Pred>
bool spin_until(Pred&& ready, int64_t us) {
  if (us <= 0) return ready();
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int i = 0; i < 8; ++i) {
      if (ready()) return true;
      std::this_thread::yield();
    }
    if (Clock::now() >= deadline) return ready();
  }
}

}  // namespace pjrtx
