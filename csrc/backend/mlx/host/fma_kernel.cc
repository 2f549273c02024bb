#include "backend/mlx/host/fma_kernel.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>

namespace pjrtx::backend {

namespace {

// x86-64's baseline has no FMA instruction: the loop is compiled for it
// here (the node is only made where the CPU has it), so fmaf is one
// instruction, not a call into libm.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PJRTX_FMA_TARGET __attribute__((target("fma")))
#else
#define PJRTX_FMA_TARGET
#endif

// Element i of x: a dense row-major array, or one value broadcast.
struct Operand {
  const float* p;
  bool scalar;
};

PJRTX_FMA_TARGET void fma_dense(Operand a, Operand b, Operand c, float* out, size_t n) {
  if (!a.scalar && !b.scalar && !c.scalar) {
    for (size_t i = 0; i < n; ++i) out[i] = __builtin_fmaf(a.p[i], b.p[i], c.p[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i)
    out[i] = __builtin_fmaf(a.p[a.scalar ? 0 : i], b.p[b.scalar ? 0 : i], c.p[c.scalar ? 0 : i]);
}

// Any strides (a transposed or partly broadcast view): element by element.
PJRTX_FMA_TARGET void fma_strided(const mx::array& a, const mx::array& b, const mx::array& c, float* out) {
  const mx::Shape& shape = a.shape();
  const size_t n = a.size(), rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  auto at = [&](const mx::array& x) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += index[d] * x.strides()[d];
    return x.data<float>()[off];
  };
  for (size_t i = 0; i < n; ++i) {
    out[i] = __builtin_fmaf(at(a), at(b), at(c));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

bool dense(const mx::array& x) { return x.flags().row_contiguous && x.data_size() == x.size(); }

class FusedMultiplyAdd : public mx::UnaryPrimitive {
 public:
  explicit FusedMultiplyAdd(mx::Stream s) : mx::UnaryPrimitive(s) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override {
    const mx::array &a = inputs[0], &b = inputs[1], &c = inputs[2];
    // Reuse a dense operand's storage when nothing else holds it, as MLX's
    // own element-wise ops do with a donated argument.
    bool reused = false;
    for (const mx::array* x : {&c, &a, &b}) {
      // (Not a view into a much bigger buffer, which would stay held.)
      if (dense(*x) && x->is_donatable() && x->itemsize() == out.itemsize() &&
          x->buffer_size() <= out.nbytes() + 16384) {
        out.copy_shared_buffer(*x);
        reused = true;
        break;
      }
    }
    if (!reused) out.set_data(mx::allocator::malloc(out.nbytes()));
    auto& enc = mx::cpu::get_command_encoder(stream());
    for (const auto& x : inputs) enc.set_input_array(x);
    enc.set_output_array(out);
    enc.dispatch([a = a, b = b, c = c, out = out]() mutable {
      auto operand = [](const mx::array& x) -> std::optional<Operand> {
        if (x.data_size() == 1) return Operand{x.data<float>(), true};
        if (dense(x)) return Operand{x.data<float>(), false};
        return std::nullopt;
      };
      auto oa = operand(a), ob = operand(b), oc = operand(c);
      if (oa && ob && oc) fma_dense(*oa, *ob, *oc, out.data<float>(), out.size());
      else fma_strided(a, b, c, out.data<float>());
    });
  }

  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error("[pjrtx_fused_multiply_add] runs on the CPU stream only");
  }

  const char* name() const override { return "pjrtx_fused_multiply_add"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return dynamic_cast<const FusedMultiplyAdd*>(&other) != nullptr;
  }
};

}  // namespace

mx::array fused_multiply_add_f32(const mx::array& a, const mx::array& b, const mx::array& c) {
  mx::Stream cpu = mx::default_stream(mx::Device::cpu);
  // One shape in a plan, but a region run batched (a scatter's body over
  // all its updates at once) mixes scalars with rows: broadcast as MLX's
  // own element-wise ops do (views with zero strides).
  const mx::Shape shape = mx::broadcast_shapes(mx::broadcast_shapes(a.shape(), b.shape()), c.shape());
  auto fit = [&](const mx::array& x) { return x.shape() == shape ? x : mx::broadcast_to(x, shape, cpu); };
  return mx::array(shape, mx::float32, std::make_shared<FusedMultiplyAdd>(cpu), {fit(a), fit(b), fit(c)});
}

}  // namespace pjrtx::backend
