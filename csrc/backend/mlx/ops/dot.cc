// stablehlo.dot_general (and the legacy stablehlo.dot): operands are
// transposed to [batch, free, contract] / [batch, contract, free], flattened
// to [B,M,K] x [B,K,N] (floats: [b...,M,K] x [b...,K,N], the batch dims kept),
// multiplied, and reshaped to StableHLO's result order
// [batch..., lhs free..., rhs free...]. Inputs are cast to the result type
// first (bf16 x bf16 -> f32 accumulates in f32). MLX's matmul takes floats
// only, so integer and bool dots multiply and sum; complex uses four real
// products.
#include <cstdint>
#include <numeric>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

struct DotPlan {
  std::vector<int> lhs_perm, rhs_perm;
  mx::Shape lhs_3d, rhs_3d, out_shape;
};

std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() &&
        std::find(b.begin(), b.end(), d) == b.end())
      out.push_back(d);
  return out;
}

int64_t product(const compiler::Shape& s, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= s[d];
  return p;
}

mx::array float_dot(const mx::array& a, const mx::array& b) {
  // [B,M,K] x [B,K,N]. With K = 1 each result is one product: XLA:CPU
  // rewrites such a dot to a multiply, so (-1) * (+0) is -0; a GEMM adds
  // the product to a +0 accumulator and returns +0.
  if (a.shape(-1) == 1) return mx::multiply(a, b);
  return mx::matmul(a, b);
}

mx::array int_dot(const mx::array& a, const mx::array& b, mx::Dtype acc) {
  // [B,M,K,1] * [B,1,K,N] summed over K.
  mx::array x = mx::expand_dims(mx::astype(a, acc), 3);
  mx::array y = mx::expand_dims(mx::astype(b, acc), 1);
  return mx::sum(mx::multiply(x, y), std::vector<int>{2}, false);
}

mx::array complex_dot(const mx::array& a, const mx::array& b) {
  mx::array ar = mx::real(a), ai = mx::imag(a), br = mx::real(b), bi = mx::imag(b);
  mx::array re = mx::subtract(mx::matmul(ar, br), mx::matmul(ai, bi));
  mx::array im = mx::add(mx::matmul(ar, bi), mx::matmul(ai, br));
  return make_complex(re, im);
}

Kernel lower_dot_impl(LowerCtx& ctx, std::vector<int64_t> lb, std::vector<int64_t> rb,
                      std::vector<int64_t> lc, std::vector<int64_t> rc) {
  const auto& lhs = ctx.in(0);
  const auto& rhs = ctx.in(1);
  const auto& out = ctx.out(0);
  if (lb.size() != rb.size())
    ctx.fail("lhs batching dims (", lb.size(), ") != rhs (", rb.size(), "): ", lhs.str(),
             " x ", rhs.str());
  if (lc.size() != rc.size())
    ctx.fail("lhs contracting dims (", lc.size(), ") != rhs (", rc.size(), "): ", lhs.str(),
             " x ", rhs.str());
  for (size_t i = 0; i < lb.size(); ++i)
    if (lhs.shape.at(lb[i]) != rhs.shape.at(rb[i]))
      ctx.fail("batch dim sizes differ: ", lhs.str(), " x ", rhs.str());
  for (size_t i = 0; i < lc.size(); ++i)
    if (lhs.shape.at(lc[i]) != rhs.shape.at(rc[i]))
      ctx.fail("contracting dim sizes differ: ", lhs.str(), " x ", rhs.str());
  auto lf = free_dims(lhs.rank(), lb, lc);
  auto rf = free_dims(rhs.rank(), rb, rc);

  DotPlan p;
  for (auto v : {&lb, &lf, &lc})
    for (int64_t d : *v) p.lhs_perm.push_back(static_cast<int>(d));
  for (auto v : {&rb, &rc, &rf})
    for (int64_t d : *v) p.rhs_perm.push_back(static_cast<int>(d));
  int64_t B = product(lhs.shape, lb), M = product(lhs.shape, lf),
          K = product(lhs.shape, lc), N = product(rhs.shape, rf);
  p.lhs_3d = {static_cast<int32_t>(B), static_cast<int32_t>(M), static_cast<int32_t>(K)};
  p.rhs_3d = {static_cast<int32_t>(B), static_cast<int32_t>(K), static_cast<int32_t>(N)};
  p.out_shape = to_mlx_shape(out.shape);

  DType rt = out.dtype;
  mx::Dtype out_dt = to_mlx(rt);
  enum { kFloat, kInt, kBool, kComplex } kind =
      compiler::is_float(rt) ? kFloat
      : compiler::is_complex(rt) ? kComplex
      : rt == DType::kPred ? kBool : kInt;
  // MLX's matmul takes any number of batch dims: a float dot keeps them as
  // they are ([b..., M, K] x [b..., K, N] gives [b..., M, N], StableHLO's
  // result order), so with one free and one contracting dim per side the
  // operands need no reshape (a reshape of a transposed view is a copy) and
  // without batch dims there is no leading 1 to add and take off again.
  if (kind == kFloat) {
    mx::Shape batch;
    for (int64_t d : lb) batch.push_back(static_cast<int32_t>(lhs.shape[d]));
    p.lhs_3d = batch;
    p.lhs_3d.push_back(static_cast<int32_t>(M));
    p.lhs_3d.push_back(static_cast<int32_t>(K));
    p.rhs_3d = batch;
    p.rhs_3d.push_back(static_cast<int32_t>(K));
    p.rhs_3d.push_back(static_cast<int32_t>(N));
  }
  return binary([p, kind, out_dt](const mx::array& a0, const mx::array& b0) {
    mx::array a = reshape_if_needed(transpose_if_needed(a0, p.lhs_perm), p.lhs_3d);
    mx::array b = reshape_if_needed(transpose_if_needed(b0, p.rhs_perm), p.rhs_3d);
    mx::array r = [&] {
      switch (kind) {
        case kFloat:
          return float_dot(mx::astype(a, out_dt), mx::astype(b, out_dt));
        case kComplex:
          return complex_dot(mx::astype(a, mx::complex64), mx::astype(b, mx::complex64));
        case kBool:
          return mx::not_equal(int_dot(a, b, mx::int32), mx::array(0, mx::int32));
        default:
          return mx::astype(int_dot(a, b, out_dt), out_dt);
      }
    }();
    return reshape_if_needed(r, p.out_shape);
  });
}

Kernel lower_dot_general(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  return lower_dot_impl(ctx, inst.attr_ints("dot_dimension_numbers.lhs_batching_dimensions", {}),
                        inst.attr_ints("dot_dimension_numbers.rhs_batching_dimensions", {}),
                        inst.attr_ints("dot_dimension_numbers.lhs_contracting_dimensions", {}),
                        inst.attr_ints("dot_dimension_numbers.rhs_contracting_dimensions", {}));
}

// Legacy dot: vector/matrix products contracting lhs's last dim with rhs's first.
Kernel lower_dot(LowerCtx& ctx) {
  return lower_dot_impl(ctx, {}, {}, {ctx.in(0).rank() - 1}, {0});
}

}  // namespace

void register_dot_ops(Registry& r) {
  r.add(compiler::Opcode::dot_general, lower_dot_general);
  r.add(compiler::Opcode::dot, lower_dot);
}

}  // namespace pjrtx::backend
