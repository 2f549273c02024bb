#include "backend/mlx/transfer.h"

#include <cstdint>
#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>
#include <mlx/transforms.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/f64_scope.h"
#include "common/error.h"

namespace pjrtx::backend {

namespace {
void copy_dim(const char* src, char*& dst, const compiler::Shape& shape,
              const int64_t* strides, int64_t elem, size_t dim) {
  const int64_t n = shape[dim];
  if (dim + 1 == shape.size()) {
    if (strides[dim] == elem) {
      std::memcpy(dst, src, n * elem);
      dst += n * elem;
      return;
    }
    for (int64_t i = 0; i < n; ++i, dst += elem)
      std::memcpy(dst, src + i * strides[dim], elem);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    copy_dim(src + i * strides[dim], dst, shape, strides, elem, dim + 1);
}
// Host int4/uint4 arrays hold one value per byte in the low nibble (ml_dtypes
// stores s4 -2 as 0x0e; XLA:CPU ignores the high nibble: 0xfe also reads -2).
// MLX storage is the canonical byte of backend/mlx/dtype.h: s4 -2 is 0xfe.
// Plain C++ here: an MLX op would bind the array to this thread's stream.
// int2/uint2 likewise, in the low 2 bits.
void canonicalize_subbyte(uint8_t* p, int64_t n, compiler::DType t) {
  const int bits = compiler::dtype_bits(t);
  const uint8_t mask = static_cast<uint8_t>((1 << bits) - 1), half = static_cast<uint8_t>(1 << (bits - 1));
  const bool is_signed = compiler::is_signed_int(t);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t v = p[i] & mask;
    p[i] = is_signed ? static_cast<uint8_t>((v ^ half) - half) : v;
  }
}

}  // namespace

void strided_copy(const void* src, void* dst, const compiler::Shape& shape,
                  const int64_t* byte_strides, int64_t elem_size) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (count == 0) return;
  if (shape.empty()) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  char* out = static_cast<char*>(dst);
  copy_dim(static_cast<const char*>(src), out, shape, byte_strides, elem_size, 0);
}

mx::array array_from_host(const void* data, const compiler::TensorType& type,
                          const int64_t* byte_strides) {
  const mx::Dtype dt = to_mlx(type.dtype);
  const mx::Shape shape = storage_shape(type);
  const int64_t nbytes = type.byte_size();
  // A zero-size array still gets a (one-element) allocation: building it with
  // an op such as mx::zeros would bind it to this thread's default stream,
  // and the executor thread could not evaluate it.
  if (nbytes == 0) return mx::array(mx::allocator::malloc(dt.size()), shape, dt);
  if (data == nullptr) invalid_argument("pjrtx: host buffer data is null");
  mx::allocator::Data buf = mx::allocator::malloc(static_cast<size_t>(nbytes));
  void* dst = buf.buffer().raw_ptr();
  if (dst == nullptr)
    throw_error(ErrorCode::kInternal, "pjrtx: MLX could not allocate ", nbytes, " bytes");
  bool dense = true;
  if (byte_strides != nullptr) {
    int64_t expect = dtype_size(type.dtype);
    for (int64_t i = type.rank() - 1; i >= 0; --i) {
      if (type.shape[i] != 1 && byte_strides[i] != expect) dense = false;
      expect *= type.shape[i];
    }
  }
  if (dense)
    std::memcpy(dst, data, nbytes);
  else
    strided_copy(data, dst, type.shape, byte_strides, dtype_size(type.dtype));
  if (compiler::is_subbyte_int(type.dtype))
    canonicalize_subbyte(static_cast<uint8_t*>(dst), nbytes, type.dtype);
  // f4e2m1fn bytes as ml_dtypes stores them: the value in the low nibble.
  if (type.dtype == compiler::DType::kF4E2M1FN)
    canonicalize_subbyte(static_cast<uint8_t*>(dst), nbytes, compiler::DType::kU4);
  return mx::array(std::move(buf), shape, dt);
}

void array_to_host(const mx::array& a, compiler::DType t, void* dst, size_t dst_size) {
  if (a.nbytes() != dst_size)
    throw_error(ErrorCode::kInternal, "pjrtx: device-to-host size mismatch: ",
                a.nbytes(), " != ", dst_size);
  if (dst_size == 0) return;
  mx::array src = a;
  src.eval();
  if (!src.flags().row_contiguous) {
    CpuScope f64(src);
    src = mx::contiguous(src);
    src.eval();
  }
  std::memcpy(dst, src.data<void>(), dst_size);
  // XLA:CPU hands s4 -2 back as 0x0e, as ml_dtypes stores it: the value's
  // nibble, the high nibble clear.
  if (compiler::is_subbyte_int(t) || t == compiler::DType::kF4E2M1FN) {
    const uint8_t mask = t == compiler::DType::kS2 || t == compiler::DType::kU2 ? 0x03 : 0x0f;
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < dst_size; ++i) p[i] &= mask;
  }
}

mx::array materialized(const mx::array& a) {
  mx::array src = a;
  src.eval();
  if (src.flags().row_contiguous) return src;
  CpuScope f64(src);
  mx::array copy = mx::contiguous(src);
  copy.eval();
  return copy;
}

// The bits go through an unsigned add of 0, so NaN payloads and -0 survive.
mx::array own_copy(const mx::array& a) {
  CpuScope f64(a);
  const mx::Dtype bits = a.itemsize() == 1   ? mx::uint8
                         : a.itemsize() == 2 ? mx::uint16
                         : a.itemsize() == 4 ? mx::uint32
                                             : mx::uint64;
  mx::array c = mx::add(mx::view(a, bits), mx::array(0, bits));
  return mx::view(c, a.dtype());
}

mx::array copy_to_own_storage(const mx::array& a) {
  CpuScope f64(a);
  mx::array copy = own_copy(a);
  copy.eval();
  return copy;
}

void unshare_outputs(std::vector<mx::array>& outputs, const std::vector<mx::array>& inputs,
                     const std::vector<bool>& donated) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    bool shared = false;
    for (size_t j = 0; j < inputs.size() && !shared; ++j)
      shared = outputs[i].id() == inputs[j].id() && !(j < donated.size() && donated[j]);
    for (size_t k = 0; k < i && !shared; ++k) shared = outputs[i].id() == outputs[k].id();
    if (shared) outputs[i] = own_copy(outputs[i]);
  }
}

namespace {
// inputs: [donated input, value, every other output and effect]: the others
// are inputs only so that this node runs after them (nothing in the graph
// reads the donated input after it).
class WriteIntoDonated : public mx::Primitive {
 public:
  explicit WriteIntoDonated(mx::Stream s) : mx::Primitive(s) {}

  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& outs) override {
    const mx::array& target = in[0];
    const mx::array& value = in[1];
    mx::array& out = outs[0];
    if (value.data_shared_ptr() == target.data_shared_ptr()) {
      out.copy_shared_buffer(value);  // MLX already reused the input's storage
      return;
    }
    auto ok = [&] {
      return target.is_donatable() && target.flags().row_contiguous &&
             value.flags().row_contiguous && target.nbytes() == value.nbytes();
    };
    // The readers of the input queued before this node hold its storage
    // until they ran; they are few and small here, so wait for them.
    if (!ok()) mx::synchronize(stream());
    if (!ok()) {
      out.copy_shared_buffer(value);
      return;
    }
    out.copy_shared_buffer(target);
    auto& enc = mx::cpu::get_command_encoder(stream());
    enc.dispatch([src = mx::array::unsafe_weak_copy(value), dst = mx::array::unsafe_weak_copy(out)]() mutable {
      std::memcpy(dst.data<char>(), src.data<char>(), src.nbytes());
    });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("pjrtx: WriteIntoDonated runs on the CPU stream only");
  }

  const char* name() const override { return "PjrtxWriteIntoDonated"; }
};
}  // namespace

void alias_small_donated(std::vector<mx::array>& outputs, const std::vector<mx::array>& inputs,
                         const std::vector<bool>& donated, const std::vector<mx::array>& effects) {
  if (mx::default_device().type != mx::Device::DeviceType::cpu) return;
  std::vector<bool> taken(inputs.size(), false);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const mx::array& o = outputs[i];
    if (o.nbytes() == 0 || o.nbytes() > kAliasSmallBytes) continue;
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (taken[j] || j >= donated.size() || !donated[j]) continue;
      if (inputs[j].shape() != o.shape() || inputs[j].dtype() != o.dtype()) continue;
      if (inputs[j].id() == o.id()) break;  // passed through: already its storage
      taken[j] = true;
      std::vector<mx::array> deps{inputs[j], o};
      for (size_t k = 0; k < outputs.size(); ++k)
        if (k != i) deps.push_back(outputs[k]);
      deps.insert(deps.end(), effects.begin(), effects.end());
      auto prim = std::make_shared<WriteIntoDonated>(mx::default_stream(mx::Device::cpu));
      outputs[i] = mx::array(o.shape(), o.dtype(), prim, std::move(deps));
      break;
    }
  }
}

uintptr_t array_address(const mx::array& a) {
  if (a.size() == 0) return 0;
  if (!a.is_available() || !a.flags().row_contiguous)
    throw_error(ErrorCode::kInternal, "pjrtx: array_address needs an evaluated contiguous array");
  return reinterpret_cast<uintptr_t>(a.data<void>());
}

}  // namespace pjrtx::backend
