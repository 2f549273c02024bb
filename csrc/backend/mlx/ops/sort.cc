// stablehlo.sort with any comparator.
//
// Fast path: at compile time the comparator runs (batched) on pairs of edge
// values. If it behaves exactly like "lexicographically less over the first
// K operands, each in MLX's sort order" (ascending; -0 == +0; every NaN equal
// and after +inf; false < true) -- which is what JAX's comparators compute
// after their canonicalization -- the sort becomes K stable MLX argsorts
// (least significant key first) and a gather of every operand.
//
// General path: any other comparator is evaluated on all n x n pairs along
// the sort dim; an element's position is the number of elements that compare
// less, plus the equal ones before it (stable). O(n^2), so it is limited to
// n <= kMaxGeneralSortLength.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/mlx/complex128.h"
#include "backend/mlx/ops/common.h"
#include "backend/mlx/transfer.h"
#include "common/error.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

constexpr int64_t kMaxGeneralSortLength = 4096;
constexpr size_t kMaxProbes = 20000;

// Probe values of one dtype with their rank in MLX's sort order.
// rank: MLX's order; total_rank: IEEE totalOrder (-NaN < -inf < -0 < +0
// < +inf < +NaN), what TOTALORDER compares compute. Equal for non-floats.
struct ProbeSet {
  compiler::TensorType type;  // dtype, shape [count]
  std::vector<uint8_t> bytes;
  std::vector<int> rank, total_rank;
};

template <typename T>
void push(ProbeSet& p, T v, int rank, int total_rank = -1) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  p.bytes.insert(p.bytes.end(), b, b + sizeof(T));
  p.rank.push_back(rank);
  p.total_rank.push_back(total_rank < 0 ? rank : total_rank);
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // probe values are exact in bf16
}

uint16_t f32_to_f16_bits(float f) {
  // Exact for the probe values below (normal numbers, 0, inf, NaN).
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, man = u & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp == 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | ((exp - 112) << 10) | (man >> 13));
}

std::optional<ProbeSet> probe_set(DType t) {
  ProbeSet p;
  p.type.dtype = t;
  if (compiler::is_float(t)) {
    const float nan = std::nanf(""), inf = INFINITY;
    struct V { float v; int rank, total; };
    const std::vector<V> vals = {
        {-inf, 0, 1}, {-1.5f, 1, 2}, {-0.0f, 2, 3}, {0.0f, 2, 4}, {0.25f, 3, 5},
        {2.0f, 4, 6}, {inf, 5, 7}, {nan, 6, 8}, {-nan, 6, 0}};
    for (auto [v, r, tr] : vals) {
      switch (t) {
        case DType::kF32: push(p, v, r, tr); break;
        case DType::kF64: push(p, static_cast<double>(v), r, tr); break;
        case DType::kBF16: push(p, f32_to_bf16_bits(v), r, tr); break;
        default: push(p, f32_to_f16_bits(v), r, tr); break;
      }
    }
  } else if (compiler::is_signed_int(t) || compiler::is_unsigned_int(t)) {
    int bits = compiler::dtype_bits(t);
    bool sgn = compiler::is_signed_int(t);
    std::vector<int64_t> vals = sgn ? std::vector<int64_t>{signed_min(t), -1, 0, 1, 2,
                                                            (int64_t{1} << (std::min(bits, 63) - 1)) - 1}
                                    : std::vector<int64_t>{0, 1, 2, 7};
    for (size_t i = 0; i < vals.size(); ++i) {
      int64_t v = vals[i];
      switch (bits) {
        case 4: case 8: push(p, static_cast<int8_t>(v), static_cast<int>(i)); break;
        case 16: push(p, static_cast<int16_t>(v), static_cast<int>(i)); break;
        case 32: push(p, static_cast<int32_t>(v), static_cast<int>(i)); break;
        default: push(p, v, static_cast<int>(i)); break;
      }
    }
    if (!sgn) {  // and the type's max
      // u4 too takes one byte; its upload keeps the low nibble: 15.
      std::vector<uint8_t> ones(std::max(bits / 8, 1), 0xff);
      p.bytes.insert(p.bytes.end(), ones.begin(), ones.end());
      p.rank.push_back(static_cast<int>(vals.size()));
      p.total_rank.push_back(static_cast<int>(vals.size()));
    }
  } else if (t == DType::kPred) {
    push(p, uint8_t{0}, 0);
    push(p, uint8_t{1}, 1);
  } else if (t == DType::kC128) {
    // Every (re, im) pair of f64 probes, ranked by re, then im: JAX's
    // comparators order a complex key as the keys (real, imag).
    ProbeSet f = *probe_set(DType::kF64);
    const size_t m = f.rank.size();
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < m; ++j) {
        p.bytes.insert(p.bytes.end(), f.bytes.begin() + 8 * i, f.bytes.begin() + 8 * i + 8);
        p.bytes.insert(p.bytes.end(), f.bytes.begin() + 8 * j, f.bytes.begin() + 8 * j + 8);
        p.rank.push_back(f.rank[i] * 16 + f.rank[j]);
        p.total_rank.push_back(f.total_rank[i] * 16 + f.total_rank[j]);
      }
  } else {
    return std::nullopt;
  }
  p.type.shape = {static_cast<int64_t>(p.rank.size())};
  return p;
}

mx::array probe_values(const ProbeSet& s, const std::vector<int32_t>& which) {
  mx::array all = array_from_host(s.bytes.data(), s.type, nullptr);
  mx::array idx(which.data(), {static_cast<int32_t>(which.size())}, mx::int32);
  return mx::take(all, idx, 0);
}

// Whether the comparator is lexicographic ascending over the first k
// operands (and ignores the others), checked on edge-value pairs.
bool is_lexicographic(const RegionProgram& cmp, RunState& st, const std::vector<ProbeSet>& sets,
                      size_t k, bool descending, bool total_order) {
  size_t n = sets.size();
  // Enumerate (a, b) choices for the k keys: all of them if few, else a
  // deterministic sample.
  size_t total = 1;
  for (size_t i = 0; i < k; ++i) total *= sets[i].rank.size() * sets[i].rank.size();
  size_t count = std::min(total, kMaxProbes);
  std::mt19937 rng(12345);
  std::vector<std::vector<int32_t>> a(n, std::vector<int32_t>(count)), b = a;
  std::vector<uint8_t> want(count);
  for (size_t p = 0; p < count; ++p) {
    size_t code = total <= kMaxProbes ? p : rng() % total;
    int verdict = 0;  // -1 less, +1 greater, 0 equal so far
    for (size_t i = 0; i < n; ++i) {
      size_t m = sets[i].rank.size();
      if (i < k) {
        a[i][p] = static_cast<int32_t>(code % m);
        code /= m;
        b[i][p] = static_cast<int32_t>(code % m);
        code /= m;
        const auto& ranks = total_order ? sets[i].total_rank : sets[i].rank;
        int ra = ranks[a[i][p]], rb = ranks[b[i][p]];
        if (verdict == 0 && ra != rb) verdict = ra < rb ? -1 : 1;
      } else {  // non-keys differ both ways, so a comparator that reads them fails
        a[i][p] = static_cast<int32_t>(p % 2 ? 0 : m - 1);
        b[i][p] = static_cast<int32_t>(p % 2 ? m - 1 : 0);
      }
    }
    want[p] = descending ? verdict > 0 : verdict < 0;
  }
  Arrays args;
  for (size_t i = 0; i < n; ++i) {
    args.push_back(probe_values(sets[i], a[i]));
    args.push_back(probe_values(sets[i], b[i]));
  }
  Arrays out;
  try {
    out = cmp.run_batched(st, args);
  } catch (const Error&) {
    return false;  // e.g. it reads a captured value only known at run time
  }
  if (out.size() != 1) return false;
  mx::array got = mx::astype(mx::broadcast_to(out[0], {static_cast<int32_t>(count)}), mx::uint8);
  got.eval();
  return std::equal(want.begin(), want.end(), got.data<uint8_t>());
}

// An integer key whose order is MLX's sort order (-0 == +0, NaNs equal and
// last); ~key is then exactly the reverse order.
mx::array order_key(const mx::array& x, DType t, bool total) {
  if (t == DType::kPred) return mx::astype(x, mx::uint8);
  if (!compiler::is_float(t)) return x;
  int bits = compiler::dtype_bits(t);
  mx::array y = x;
  if (!total) {  // MLX's order: fold -0 into +0 and every NaN into one
    y = mx::where(mx::equal(x, mx::zeros_like(x)), mx::zeros_like(x), x);
    y = mx::where(mx::isnan(x), mx::full_like(x, std::nanf("")), y);
  }
  mx::Dtype st = signed_of_width(bits);
  mx::array k = mx::view(y, st);
  mx::array max_int = mx::astype(mx::right_shift(all_ones(unsigned_of_width(bits)),
                                                 mx::array(1, unsigned_of_width(bits))), st);
  return mx::where(mx::less(k, mx::zeros_like(k)), mx::bitwise_xor(k, max_int), k);
}

mx::array sort_key(const mx::array& x, DType t, bool descending, bool total) {
  if (!descending && !total) return t == DType::kPred ? mx::astype(x, mx::uint8) : x;
  mx::array k = order_key(x, t, total);
  return descending ? mx::bitwise_invert(k) : k;
}

Kernel lower_sort(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  size_t n = ctx.num_in();
  if (n == 0 || ctx.num_out() != n) ctx.fail("expects as many results as operands");
  int64_t rank = ctx.in(0).rank();
  int64_t dim = inst.attr_int("dimension", -1);
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) ctx.fail("dimension out of range for ", ctx.in(0).str());
  int64_t len = ctx.in(0).shape[dim];
  std::vector<DType> types;
  for (size_t i = 0; i < n; ++i) types.push_back(ctx.in(i).dtype);
  if (len <= 1) return [](RunState&, const Arrays& in) { return in; };
  auto cmp = ctx.lower_region(inst.regions.at(0));
  int axis = static_cast<int>(dim);

  std::vector<ProbeSet> sets;
  for (DType t : types) {
    auto s = probe_set(t);
    if (!s) break;
    sets.push_back(std::move(*s));
  }
  size_t keys = 0;
  bool descending = false, total = false;
  if (sets.size() == n) {
    RunState probe_state = ctx.constant_state();
    for (bool tot : {false, true})
      for (bool desc : {false, true})
        for (size_t k = 1; k <= std::min<size_t>(n, 3) && keys == 0; ++k)
          if (is_lexicographic(*cmp, probe_state, sets, k, desc, tot)) {
            keys = k;
            descending = desc;
            total = tot;
          }
  }

  if (keys > 0) {
    return [keys, axis, types, descending, total](RunState&, const Arrays& in) {
      // The keys in significance order; a c128 key (stored as f64 pairs,
      // complex128.h) is two f64 keys, its real then its imaginary part.
      std::vector<std::pair<mx::array, DType>> ks;
      for (size_t k = 0; k < keys; ++k) {
        if (types[k] != DType::kC128) {
          ks.emplace_back(in[k], types[k]);
          continue;
        }
        ks.emplace_back(c128_part(in[k], 0), DType::kF64);
        ks.emplace_back(c128_part(in[k], 1), DType::kF64);
      }
      // Least significant key first; each argsort is stable.
      auto key_of = [&](size_t k) { return sort_key(ks[k].first, ks[k].second, descending, total); };
      mx::array perm = mx::argsort(key_of(ks.size() - 1), axis);
      for (size_t k = ks.size() - 1; k-- > 0;) {
        mx::array key = mx::take_along_axis(key_of(k), perm, axis);
        perm = mx::take_along_axis(perm, mx::argsort(key, axis), axis);
      }
      Arrays out;
      for (size_t i = 0; i < in.size(); ++i) {
        if (types[i] != DType::kC128) {
          out.push_back(mx::take_along_axis(in[i], perm, axis));
          continue;
        }
        mx::array p2 = mx::expand_dims(perm, -1);
        mx::Shape shape = in[i].shape();
        shape[axis] = p2.shape(axis);
        out.push_back(mx::take_along_axis(in[i], mx::broadcast_to(p2, shape), axis));
      }
      return out;
    };
  }
  for (DType t : types)
    if (t == DType::kC128)
      ctx.fail("complex128 operands need a comparator that orders keys ascending or descending "
               "(what JAX's sort emits); this one is not, and the general sort does not take c128");
  if (len > kMaxGeneralSortLength)
    ctx.fail("comparator is not a plain ascending order over its keys, and the general "
             "O(n^2) sort handles at most ", kMaxGeneralSortLength, " elements per row (got ", len, ")");
  return [cmp, axis, len](RunState& st, const Arrays& in) {
    // Move the sort dim last: x[..., n]. lt[..., i, j] = cmp(x_j, x_i).
    Arrays lhs_j, rhs_i;
    for (const auto& x : in) {
      mx::array m = mx::moveaxis(x, axis, -1);
      lhs_j.push_back(mx::expand_dims(m, -2));  // [..., 1, n]: j
      rhs_i.push_back(mx::expand_dims(m, -1));  // [..., n, 1]: i
    }
    Arrays args_lt, args_gt;
    for (size_t k = 0; k < in.size(); ++k) {
      args_lt.push_back(lhs_j[k]);
      args_lt.push_back(rhs_i[k]);
      args_gt.push_back(rhs_i[k]);
      args_gt.push_back(lhs_j[k]);
    }
    mx::array lt = cmp->run_batched(st, args_lt)[0];  // x_j < x_i
    mx::array gt = cmp->run_batched(st, args_gt)[0];  // x_i < x_j
    int n = static_cast<int>(len);
    mx::array j_before_i = mx::less(mx::reshape(mx::arange(n), {1, n}), mx::reshape(mx::arange(n), {n, 1}));
    mx::array tie_before = mx::logical_and(j_before_i, mx::logical_not(mx::logical_or(lt, gt)));
    mx::array pos = mx::add(mx::sum(mx::astype(lt, mx::int32), -1), mx::sum(mx::astype(tie_before, mx::int32), -1));
    mx::array perm = mx::argsort(pos, -1);
    Arrays out;
    for (const auto& x : in) {
      mx::array m = mx::moveaxis(x, axis, -1);
      out.push_back(mx::moveaxis(mx::take_along_axis(m, perm, -1), -1, axis));
    }
    return out;
  };
}

// custom_call @mhlo.topk: what jaxlib 0.9.2 and older send for lax.top_k
// (chlo.top_k legalized to a custom call; 0.10.x sends a stablehlo.composite
// with its decomposition instead). The k largest (or, with `largest =
// false`, smallest) along the last dimension in XLA's total order (NaN
// above +inf, +0 above -0), ties in index order, with their int32 indices.
Kernel lower_mhlo_topk(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  if (ctx.num_in() != 1 || ctx.num_out() != 2)
    ctx.fail("custom_call @mhlo.topk expects (operand) -> (values, indices); got ", ctx.num_in(),
             " operands and ", ctx.num_out(), " results");
  const auto& x = ctx.in(0);
  if (x.rank() < 1 || x.dtype == DType::kC64 || x.dtype == DType::kC128 || x.dtype == DType::kPred)
    ctx.fail("custom_call @mhlo.topk takes a real operand of rank >= 1, got ", x.str());
  int64_t k = inst.attr_int("mhlo.attributes.k", -1);
  bool largest = inst.attr_bool("mhlo.attributes.largest", true);
  compiler::Shape want = x.shape;
  want.back() = k;
  if (k < 0 || k > x.shape.back() || ctx.out(0).shape != want || ctx.out(0).dtype != x.dtype ||
      ctx.out(1).shape != want || ctx.out(1).dtype != DType::kS32)
    ctx.fail("custom_call @mhlo.topk k=", k, " of ", x.str(), " gives ", ctx.out(0).str(), ", ",
             ctx.out(1).str());
  DType t = x.dtype;
  int count = static_cast<int>(k);
  return [t, largest, count](RunState&, const Arrays& in) {
    int axis = static_cast<int>(in[0].ndim()) - 1;
    mx::array perm = mx::argsort(sort_key(in[0], t, largest, /*total=*/true), axis);  // stable
    mx::Shape start(perm.ndim(), 0);
    mx::Shape stop = perm.shape();
    stop[axis] = count;
    perm = mx::slice(perm, start, stop);
    return Arrays{mx::take_along_axis(in[0], perm, axis), mx::astype(perm, mx::int32)};
  };
}

}  // namespace

void register_sort_ops(Registry& r) {
  r.add(compiler::Opcode::sort, lower_sort);
  r.add_target("mhlo.topk", lower_mhlo_topk);
}

}  // namespace pjrtx::backend
