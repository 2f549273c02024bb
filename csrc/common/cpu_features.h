// What this machine's CPU can do that changes XLA:CPU's answers.
#pragma once

namespace pjrtx {

// Whether the CPU has fused multiply-add (x86-64: FMA3; arm64: always).
// XLA:CPU contracts a float multiply into its add only where it does.
inline bool host_has_fma() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("fma");
#elif defined(__aarch64__) || defined(__arm64__)
  return true;
#else
  return false;
#endif
}

}  // namespace pjrtx
