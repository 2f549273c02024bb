#include "backend/mlx/arg_rule.h"

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace pjrtx::backend {

namespace {

struct Case {
  std::vector<float> v;
  uint32_t want_max, want_min;
};

// Short vectors (one thread's loop on a GPU) and long ones (split across a
// block's threads and merged), with NaNs first, inside and last, ties, and
// signed zeros. Every value is exact in float16 and bfloat16.
std::vector<Case> cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Case> cs = {
      {{3, nan, 1, 5}, 1, 1},
      {{1, 2, nan}, 2, 2},
      {{nan, 1, 2}, 0, 0},
      {{-0.0f, 0.0f, -1, 5, 5, -1}, 3, 2},
      {{0.0f, -0.0f}, 0, 0},
  };
  std::vector<float> ties(5000, 0.0f);
  ties[1234] = ties[4000] = 7;
  ties[2000] = ties[3500] = -7;
  cs.push_back({ties, 1234, 2000});
  std::vector<float> nans = ties;
  nans[2500] = nans[4500] = nan;
  cs.push_back({nans, 2500, 2500});
  cs.push_back({std::vector<float>(3000, 1.0f), 0, 0});
  return cs;
}

bool probe(const mx::Device& device, mx::Dtype dtype) {
  mx::Stream s = mx::default_stream(device);
  std::vector<mx::array> outs;
  const auto cs = cases();
  for (const Case& c : cs) {
    mx::array x = mx::astype(
        mx::array(c.v.data(), {static_cast<int>(c.v.size())}, mx::float32), dtype, s);
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
    const uint32_t mx_ = cs[i].want_max, mn = cs[i].want_min;
    if (o[0].item<uint32_t>() != mx_ || o[1].item<uint32_t>() != mn) return false;
    const uint32_t* a = o[2].data<uint32_t>();
    const uint32_t* b = o[3].data<uint32_t>();
    if (a[0] != mx_ || a[1] != mx_ || b[0] != mn || b[1] != mn) return false;
  }
  return true;
}

std::mutex mu;
std::map<std::pair<int, int>, bool> known;
std::optional<bool> forced;

}  // namespace

bool mlx_arg_rule_holds(const mx::Device& device, mx::Dtype dtype) {
  std::lock_guard<std::mutex> lock(mu);
  if (forced) return *forced;
  const auto key = std::make_pair(static_cast<int>(device.type), static_cast<int>(dtype.val()));
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  bool holds = false;
  try {
    holds = probe(device, dtype);
  } catch (const std::exception&) {
    holds = false;  // e.g. a dtype the device lacks: take the general path
  }
  known.emplace(key, holds);
  return holds;
}

void force_mlx_arg_rule(std::optional<bool> value) {
  std::lock_guard<std::mutex> lock(mu);
  forced = value;
}

}  // namespace pjrtx::backend
