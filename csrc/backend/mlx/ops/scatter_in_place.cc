#include "backend/mlx/ops/scatter_in_place.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/primitives.h>
#include <mlx/transforms.h>
#include <stdexcept>
#include <string>
#include <vector>
#include <memory>

namespace pjrtx::backend::ops {

namespace {

// The index at element offset `off` of `a`; whether it lies in [0, hi].
bool read_index(const mx::array& a, int64_t off, int64_t hi, int64_t* value) {
  int64_t v = 0;
  switch (a.dtype()) {
    case mx::int8: v = a.data<int8_t>()[off]; break;
    case mx::int16: v = a.data<int16_t>()[off]; break;
    case mx::int32: v = a.data<int32_t>()[off]; break;
    case mx::int64: v = a.data<int64_t>()[off]; break;
    case mx::uint8: v = a.data<uint8_t>()[off]; break;
    case mx::uint16: v = a.data<uint16_t>()[off]; break;
    case mx::uint32: v = a.data<uint32_t>()[off]; break;
    case mx::uint64: {
      uint64_t u = a.data<uint64_t>()[off];
      if (u > static_cast<uint64_t>(hi)) return false;
      v = static_cast<int64_t>(u);
      break;
    }
    default: throw std::runtime_error("[scatter] indices must be integers");
  }
  *value = v;
  return v >= 0 && v <= hi;
}

// Advances the multi-index `i` over `shape` (row-major); false after the last.
bool next(std::vector<int64_t>& i, const std::vector<int64_t>& shape) {
  for (size_t d = i.size(); d-- > 0;) {
    if (++i[d] < shape[d]) return true;
    i[d] = 0;
  }
  return false;
}

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// `src` (any strides, views and broadcasts included) into row-major `dst`.
void copy_row_major(const mx::array& src, char* dst) {
  const size_t item = src.itemsize();
  if (src.flags().row_contiguous) {
    std::memcpy(dst, src.data<char>(), src.nbytes());
    return;
  }
  if (src.size() == 0) return;
  std::vector<int64_t> shape(src.shape().begin(), src.shape().end()), i(shape.size(), 0);
  const char* base = src.data<char>();
  do {
    int64_t off = 0;
    for (size_t d = 0; d < i.size(); ++d) off += i[d] * src.strides()[d];
    std::memcpy(dst, base + off * static_cast<int64_t>(item), item);
    dst += item;
  } while (next(i, shape));
}

void scatter_set(const ScatterLayout& L, const mx::array& indices, const mx::array& updates,
                 char* out) {
  const int64_t item = static_cast<int64_t>(updates.itemsize());
  const size_t rank = L.operand_shape.size();
  std::vector<int64_t> ostride(rank, 1);
  for (size_t d = rank; d-- > 1;) ostride[d - 1] = ostride[d] * L.operand_shape[d];
  std::vector<int64_t> hi(rank);
  for (size_t d = 0; d < rank; ++d) hi[d] = L.operand_shape[d] - L.window[d];
  // Batch dims of the indices (all but the index vector dim), which are
  // also the update's scatter dims, in order.
  std::vector<int64_t> bdims, bshape, uscatter;
  for (int64_t d = 0; d < static_cast<int64_t>(L.index_shape.size()); ++d)
    if (d != L.index_vector_dim) {
      bdims.push_back(d);
      bshape.push_back(L.index_shape[d]);
    }
  for (int64_t d = 0; d < static_cast<int64_t>(L.update_shape.size()); ++d)
    if (!std::count(L.update_window_dims.begin(), L.update_window_dims.end(), d))
      uscatter.push_back(d);
  std::vector<int64_t> wshape;
  for (int64_t d : L.window_operand_dims) wshape.push_back(L.window[d]);
  if (count(bshape) == 0 || count(wshape) == 0) return;
  const auto& istr = indices.strides();
  const auto& ustr = updates.strides();
  const char* ubase = updates.data<char>();
  const bool explicit_vector = L.index_vector_dim < static_cast<int64_t>(L.index_shape.size());
  std::vector<int64_t> b(bdims.size(), 0), start(rank), w(wshape.size());
  do {
    std::fill(start.begin(), start.end(), 0);
    int64_t ioff = 0;
    for (size_t i = 0; i < bdims.size(); ++i) ioff += b[i] * istr[bdims[i]];
    bool valid = true;
    for (size_t c = 0; c < L.index_map.size() && valid; ++c) {
      int64_t off = ioff + (explicit_vector ? static_cast<int64_t>(c) * istr[L.index_vector_dim] : 0);
      int64_t d = L.index_map[c];
      valid = read_index(indices, off, hi[d], &start[d]);
    }
    if (!valid) continue;  // XLA drops a window that does not fit
    for (size_t j = 0; j < L.batching_operand.size(); ++j) {
      int64_t d = L.batching_indices[j];
      start[L.batching_operand[j]] = b[d < L.index_vector_dim ? d : d - 1];
    }
    int64_t dst0 = 0, src0 = 0;
    for (size_t d = 0; d < rank; ++d) dst0 += start[d] * ostride[d];
    for (size_t i = 0; i < uscatter.size(); ++i) src0 += b[i] * ustr[uscatter[i]];
    std::fill(w.begin(), w.end(), 0);
    do {
      int64_t dst = dst0, src = src0;
      for (size_t j = 0; j < w.size(); ++j) {
        dst += w[j] * ostride[L.window_operand_dims[j]];
        src += w[j] * ustr[L.update_window_dims[j]];
      }
      std::memcpy(out + dst * item, ubase + src * item, static_cast<size_t>(item));
    } while (next(w, wshape));
  } while (next(b, bshape));
}

// Copying this many bytes costs more than waiting for the CPU stream to
// run what is queued (tens of microseconds on a busy machine).
constexpr size_t kWaitToDonateBytes = 256 * 1024;

bool donatable(const mx::array& operand, const mx::array& out) {
  return operand.is_donatable() && operand.flags().row_contiguous &&
         operand.itemsize() == out.itemsize();
}

class ScatterSetInPlace : public mx::Primitive {
 public:
  ScatterSetInPlace(mx::Stream s, std::shared_ptr<const ScatterLayout> layout)
      : mx::Primitive(s), layout_(std::move(layout)) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    const mx::array& operand = inputs[0];
    mx::array& out = outputs[0];
    // The operand's storage becomes the output's when nothing else holds
    // it (MLX's own rule for element-wise ops and its scatter).
    bool donated = donatable(operand, out);
    // Reads of the operand already queued on this stream (x[j] in
    // x.at[i].set(f(x[j]))) keep its storage referenced until they ran,
    // although nothing after this node reads it. For a large operand,
    // waiting for them is cheaper than copying it.
    if (!donated && operand.nbytes() >= kWaitToDonateBytes && operand.flags().row_contiguous &&
        operand.itemsize() == out.itemsize()) {
      mx::synchronize(stream());
      donated = donatable(operand, out);
    }
    if (donated)
      out.copy_shared_buffer(operand);
    else
      out.set_data(mx::allocator::malloc(out.nbytes()));
    auto& enc = mx::cpu::get_command_encoder(stream());
    for (const auto& i : inputs) enc.set_input_array(i);
    enc.set_output_array(out);
    // Weak copies, as MLX's own kernels take: a handle that shares the
    // array would keep the output from being donated to the next step. The
    // inputs' storage is kept alive until this task ran by MLX (cpu::eval),
    // the output's by the graph.
    std::optional<mx::array> source;
    if (!donated) source = mx::array::unsafe_weak_copy(operand);
    enc.dispatch([layout = layout_, source = std::move(source),
                  indices = mx::array::unsafe_weak_copy(inputs[1]),
                  updates = mx::array::unsafe_weak_copy(inputs[2]),
                  out = mx::array::unsafe_weak_copy(out)]() mutable {
      if (source) copy_row_major(*source, out.data<char>());
      scatter_set(*layout, indices, updates, out.data<char>());
    });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("[scatter] the in-place scatter runs on the CPU stream only");
  }

  const char* name() const override { return "PjrtxScatterSet"; }

 private:
  std::shared_ptr<const ScatterLayout> layout_;
};

}  // namespace

mx::array scatter_set_in_place(const mx::array& operand, const mx::array& indices,
                               const mx::array& updates,
                               std::shared_ptr<const ScatterLayout> layout) {
  mx::Stream cpu = mx::default_stream(mx::Device::cpu);
  auto prim = std::make_shared<ScatterSetInPlace>(cpu, std::move(layout));
  return mx::array(operand.shape(), operand.dtype(), prim, {operand, indices, updates});
}

}  // namespace pjrtx::backend::ops
