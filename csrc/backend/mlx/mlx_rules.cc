#include "backend/mlx/mlx_rules.h"

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace pjrtx::backend {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

mx::array vec(const std::vector<float>& v, mx::Dtype dtype, const mx::Stream& s) {
  return mx::astype(mx::array(v.data(), {static_cast<int>(v.size())}, mx::float32), dtype, s);
}

// ---- argmax / argmin --------------------------------------------------------

struct ArgCase {
  std::vector<float> v;
  uint32_t want_max, want_min;
};

// Short vectors (one thread's loop on a GPU) and long ones (split across a
// block's threads and merged), with NaNs first, inside and last, ties, and
// signed zeros. Every value is exact in float16 and bfloat16.
std::vector<ArgCase> arg_cases() {
  std::vector<ArgCase> cs = {
      {{3, kNaN, 1, 5}, 1, 1},
      {{1, 2, kNaN}, 2, 2},
      {{kNaN, 1, 2}, 0, 0},
      {{-0.0f, 0.0f, -1, 5, 5, -1}, 3, 2},
      {{0.0f, -0.0f}, 0, 0},
  };
  std::vector<float> ties(5000, 0.0f);
  ties[1234] = ties[4000] = 7;
  ties[2000] = ties[3500] = -7;
  cs.push_back({ties, 1234, 2000});
  std::vector<float> nans = ties;
  nans[2500] = nans[4500] = kNaN;
  cs.push_back({nans, 2500, 2500});
  cs.push_back({std::vector<float>(3000, 1.0f), 0, 0});
  return cs;
}

bool probe_arg(const mx::Device& device, mx::Dtype dtype) {
  mx::Stream s = mx::default_stream(device);
  std::vector<mx::array> outs;
  const auto cs = arg_cases();
  for (const ArgCase& c : cs) {
    mx::array x = vec(c.v, dtype, s);
    // The same vector as the columns of an [n, 2] array: a strided reduction.
    mx::array cols = mx::stack({x, x}, 1, s);
    outs.push_back(mx::argmax(x, 0, false, s));
    outs.push_back(mx::argmin(x, 0, false, s));
    outs.push_back(mx::argmax(cols, 0, false, s));
    outs.push_back(mx::argmin(cols, 0, false, s));
  }
  mx::eval(outs);
  for (size_t i = 0; i < cs.size(); ++i) {
    const mx::array* o = &outs[4 * i];
    const uint32_t hi = cs[i].want_max, lo = cs[i].want_min;
    if (o[0].item<uint32_t>() != hi || o[1].item<uint32_t>() != lo) return false;
    const uint32_t* a = o[2].data<uint32_t>();
    const uint32_t* b = o[3].data<uint32_t>();
    if (a[0] != hi || a[1] != hi || b[0] != lo || b[1] != lo) return false;
  }
  return true;
}

// ---- cummax / cummin --------------------------------------------------------

// Whether each element of a scan of v is NaN exactly from the first NaN on
// (in the scan's direction); the numbers before it are not checked here.
bool nan_from_first(const mx::array& r, const std::vector<float>& v, bool reverse) {
  mx::array f = mx::astype(r, mx::float32);
  mx::eval(f);
  const float* p = f.data<float>();
  const int n = static_cast<int>(v.size());
  bool seen = false;
  for (int k = 0; k < n; ++k) {
    int i = reverse ? n - 1 - k : k;
    seen = seen || std::isnan(v[i]);
    if (std::isnan(p[i]) != seen) return false;
  }
  return true;
}

bool probe_scan(const mx::Device& device, mx::Dtype dtype) {
  mx::Stream s = mx::default_stream(device);
  std::vector<std::vector<float>> cs = {{1, 3, kNaN, 5, 4}, {kNaN, 1, 2}, {2, 1, kNaN}};
  std::vector<float> longer(5000);
  for (int i = 0; i < 5000; ++i) longer[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  longer[2600] = kNaN;
  cs.push_back(longer);
  for (const auto& v : cs) {
    mx::array x = vec(v, dtype, s);
    for (bool reverse : {false, true}) {
      if (!nan_from_first(mx::cummax(x, 0, reverse, true, s), v, reverse)) return false;
      if (!nan_from_first(mx::cummin(x, 0, reverse, true, s), v, reverse)) return false;
    }
  }
  return true;
}

enum class Rule { kArg, kScan };

std::mutex mu;
std::map<std::tuple<int, int, int>, bool> known;
std::optional<bool> forced;

bool holds(Rule rule, const mx::Device& device, mx::Dtype dtype) {
  std::lock_guard<std::mutex> lock(mu);
  if (forced) return *forced;
  const auto key = std::make_tuple(static_cast<int>(rule), static_cast<int>(device.type),
                                   static_cast<int>(dtype.val()));
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  bool ok = false;
  try {
    ok = rule == Rule::kArg ? probe_arg(device, dtype) : probe_scan(device, dtype);
  } catch (const std::exception&) {
    ok = false;  // e.g. a dtype the device lacks: take the general path
  }
  known.emplace(key, ok);
  return ok;
}

}  // namespace

bool mlx_arg_rule_holds(const mx::Device& device, mx::Dtype dtype) {
  return holds(Rule::kArg, device, dtype);
}

bool mlx_scan_rule_holds(const mx::Device& device, mx::Dtype dtype) {
  return holds(Rule::kScan, device, dtype);
}

namespace {
mx::Device runs_on(mx::Dtype dtype) {
  return dtype == mx::float64 ? mx::Device(mx::Device::cpu) : mx::default_device();
}
}  // namespace

bool mlx_arg_rule_holds(mx::Dtype dtype) { return mlx_arg_rule_holds(runs_on(dtype), dtype); }

bool mlx_scan_rule_holds(mx::Dtype dtype) { return mlx_scan_rule_holds(runs_on(dtype), dtype); }

void force_mlx_rules(std::optional<bool> value) {
  std::lock_guard<std::mutex> lock(mu);
  forced = value;
}

}  // namespace pjrtx::backend
