// stablehlo.fft: FFT, IFFT, RFFT and IRFFT over the 1-3 trailing dims named
// by fft_length, every dim in front a batch dim.
//
// Semantics are XLA:CPU's: FFT and RFFT are unscaled, IFFT and IRFFT divide
// by the product of fft_length (JAX's "backward" norm multiplies by 1 and
// relies on that). RFFT's last dim is n/2+1; IRFFT's output last dim is n
// (odd or even) from n/2+1 inputs, the imaginary parts of the inputs a real
// signal cannot have (bin 0, and bin n/2 for even n) ignored, as pocketfft's
// and ducc's c2r do. mx::fft's Backward norm is exactly this scaling.
//
// Shapes are checked here, once: StableHLO's verifier already rejects RFFT and
// IRFFT operands whose trailing dims disagree with fft_length, but not FFT
// and IFFT ones, where XLA:CPU computes on a prefix or aborts inside ducc
// ("array sizes are not conformable"); we refuse them with a message instead.
//
// mx::fft computes in float32/complex64 only (fft_impl casts its input), so
// float64/complex128 transforms run as a host kernel in double precision
// instead (c128 is stored as f64 (re, im) pairs, complex128.h): radix-2
// Cooley-Tukey for power-of-two lengths, Bluestein's chirp-z through one
// for the others, with twiddles and chirps from exactly reduced angles, so
// the error stays a few ulps times log n, as pocketfft's does. The 32-bit
// transforms run on the default stream's device (GPU kernels on Metal and
// CUDA, pocketfft on the CPU).
#include <cstdint>
#include <mlx/fft.h>

#include <cmath>
#include <complex>

#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

std::string dims_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}


// ---- double precision -------------------------------------------------------

using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// exp(sign * 2 pi i num / den), the angle reduced exactly first.
cd unit_root(int64_t num, int64_t den, int sign) {
  num %= den;
  if (num < 0) num += den;
  const double a = 2.0 * kPi * static_cast<double>(num) / static_cast<double>(den);
  return {std::cos(a), sign * std::sin(a)};
}

// One length's unscaled 1-D transform, forward (e^-) or inverse (e^+).
class Dft {
 public:
  explicit Dft(int64_t n) : n_(n) {
    pow2_ = n > 0 && (n & (n - 1)) == 0;
    m_ = pow2_ ? n : 1;
    if (!pow2_)
      while (m_ < 2 * n - 1) m_ <<= 1;
    tw_.resize(m_ / 2);
    for (int64_t k = 0; k < m_ / 2; ++k) tw_[k] = unit_root(k, m_, -1);
    if (!pow2_) {
      // chirp_j = exp(-pi i j^2 / n), j^2 reduced mod 2n.
      chirp_.resize(n);
      for (int64_t j = 0; j < n; ++j) chirp_[j] = unit_root((j * j) % (2 * n), 2 * n, -1);
    }
  }

  void run(cd* x, bool inverse, std::vector<cd>& work) const {
    if (n_ <= 1) return;
    if (pow2_) return radix2(x, m_, inverse);
    // Bluestein: X_k = conj?(c_k) sum_j x_j c_j conj(c_{k-j}), a cyclic
    // convolution of length m >= 2n - 1 done with radix-2 transforms.
    auto ch = [&](int64_t j) { return inverse ? std::conj(chirp_[j]) : chirp_[j]; };
    work.assign(2 * m_, cd(0, 0));
    cd* a = work.data();
    cd* b = work.data() + m_;
    for (int64_t j = 0; j < n_; ++j) a[j] = x[j] * ch(j);
    b[0] = std::conj(ch(0));
    for (int64_t j = 1; j < n_; ++j) b[j] = b[m_ - j] = std::conj(ch(j));
    radix2(a, m_, false);
    radix2(b, m_, false);
    for (int64_t j = 0; j < m_; ++j) a[j] *= b[j];
    radix2(a, m_, true);
    const double scale = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) x[k] = a[k] * scale * ch(k);
  }

 private:
  void radix2(cd* a, int64_t n, bool inverse) const {
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const int64_t half = len / 2, step = m_ / len;
      for (int64_t i = 0; i < n; i += len)
        for (int64_t k = 0; k < half; ++k) {
          cd w = inverse ? std::conj(tw_[k * step]) : tw_[k * step];
          cd u = a[i + k], v = a[i + k + half] * w;
          a[i + k] = u + v;
          a[i + k + half] = u - v;
        }
    }
  }

  int64_t n_, m_;
  bool pow2_;
  std::vector<cd> tw_, chirp_;
};

// Transforms every line of x (row-major `shape`) along `axis`.
void transform_axis(cd* x, const std::vector<int64_t>& shape, size_t axis, bool inverse) {
  const int64_t n = shape[axis];
  if (n <= 1) return;
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  Dft dft(n);
  std::vector<cd> line(n), work;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      cd* base = x + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) line[j] = base[j * inner];
      dft.run(line.data(), inverse, work);
      for (int64_t j = 0; j < n; ++j) base[j * inner] = line[j];
    }
}

Kernel fft_f64(const std::string& type, const compiler::TensorType& in,
               const compiler::TensorType& out, const std::vector<int64_t>& n) {
  const size_t rank = in.shape.size(), k = n.size();
  double count = 1;
  for (int64_t v : n) count *= static_cast<double>(v);
  const double scale = 1.0 / count;
  HostFn fn = [=](const Arrays& ins, Arrays& outs) {
    const std::vector<int64_t>& oshape = out.shape;
    const int64_t total = out.num_elements();
    if (type == "FFT" || type == "IFFT") {
      const cd* x = ins[0].data<cd>();
      cd* y = outs[0].data<cd>();
      std::copy(x, x + total, y);
      for (size_t a = rank - k; a < rank; ++a) transform_axis(y, oshape, a, type == "IFFT");
      if (type == "IFFT")
        for (int64_t i = 0; i < total; ++i) y[i] *= scale;
      return;
    }
    const int64_t nl = n.back();
    if (type == "RFFT") {
      const double* x = ins[0].data<double>();
      cd* y = outs[0].data<cd>();
      const int64_t half = oshape.back(), lines = total / std::max<int64_t>(half, 1);
      Dft dft(nl);
      std::vector<cd> line(nl), work;
      for (int64_t l = 0; l < lines; ++l) {
        for (int64_t j = 0; j < nl; ++j) line[j] = cd(x[l * nl + j], 0.0);
        dft.run(line.data(), false, work);
        std::copy(line.begin(), line.begin() + half, y + l * half);
      }
      for (size_t a = rank - k; a + 1 < rank; ++a) transform_axis(y, oshape, a, false);
      return;
    }
    // IRFFT: inverse transforms along the leading axes, then complex-to-
    // real along the last from its n/2 + 1 bins (the imaginary parts of bin
    // 0 and, for even n, bin n/2 ignored, as pocketfft does).
    const int64_t half = in.shape.back();
    std::vector<cd> z(ins[0].data<cd>(), ins[0].data<cd>() + in.num_elements());
    for (size_t a = rank - k; a + 1 < rank; ++a) transform_axis(z.data(), in.shape, a, true);
    double* y = outs[0].data<double>();
    const int64_t lines = total / std::max<int64_t>(nl, 1);
    Dft dft(nl);
    std::vector<cd> line(nl), work;
    for (int64_t l = 0; l < lines; ++l) {
      const cd* bins = z.data() + l * half;
      for (int64_t j = 0; j < nl; ++j) {
        if (j < half) line[j] = bins[j];
        else line[j] = std::conj(bins[nl - j]);
      }
      line[0] = cd(line[0].real(), 0.0);
      if (nl % 2 == 0) line[nl / 2] = cd(line[nl / 2].real(), 0.0);
      dft.run(line.data(), true, work);
      for (int64_t j = 0; j < nl; ++j) y[l * nl + j] = line[j].real() * scale;
    }
  };
  mx::Shape oshape = storage_shape(out);
  mx::Dtype odt = to_mlx(out.dtype);
  return [fn, oshape, odt, type](RunState&, const Arrays& in) {
    return host_kernel("stablehlo.fft " + type, in, {oshape}, {odt}, fn);
  };
}

Kernel lower_fft(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  const std::string& type = ctx.inst().attr_str("fft_type");
  const std::vector<int64_t> n = ctx.inst().attr_ints("fft_length");
  const bool real = type == "RFFT" || type == "IRFFT";
  const bool inverse = type == "IFFT" || type == "IRFFT";
  if (!real && type != "FFT" && !inverse) ctx.fail("unknown fft_type ", type);

  // Element types: complex in and out for FFT/IFFT, real -> complex for RFFT,
  // complex -> real for IRFFT; the 32-bit pair runs on MLX, the 64-bit one
  // as a host kernel.
  const bool wide = in.dtype == DType::kF64 || in.dtype == DType::kC128;
  DType want_in = type == "RFFT" ? (wide ? DType::kF64 : DType::kF32) : (wide ? DType::kC128 : DType::kC64);
  DType want_out = type == "IRFFT" ? (wide ? DType::kF64 : DType::kF32) : (wide ? DType::kC128 : DType::kC64);
  if (in.dtype != want_in || out.dtype != want_out)
    ctx.fail(type, " needs ", compiler::dtype_name(want_in), " -> ",
             compiler::dtype_name(want_out), ", got ", in.str(), " -> ", out.str());

  // Shapes: 1-3 transformed trailing dims, the rest batch.
  const int64_t k = static_cast<int64_t>(n.size());
  const int64_t rank = in.rank();
  if (k < 1 || k > 3) ctx.fail("fft_length ", dims_str(n), " must have 1 to 3 entries");
  if (k > rank) ctx.fail("fft_length ", dims_str(n), " has more entries than ", in.str(), " has dims");
  if (out.rank() != rank) ctx.fail("result ", out.str(), " must have the rank of ", in.str());
  for (int64_t v : n)
    if (v < 0) ctx.fail("negative fft_length ", dims_str(n));
  std::vector<int64_t> want_in_shape = in.shape, want_out_shape = in.shape;
  for (int64_t i = 0; i < k; ++i) want_in_shape[rank - k + i] = want_out_shape[rank - k + i] = n[i];
  // n = 0 keeps a zero-length last dim (0/2+1 would be 1): StableHLO's rule.
  const int64_t half = n.back() == 0 ? 0 : n.back() / 2 + 1;
  if (type == "RFFT") want_out_shape.back() = half;
  if (type == "IRFFT") want_in_shape.back() = half;
  // For n = 0 StableHLO's verifier also takes IRFFT's n/2+1 = 1 input (XLA
  // runs c64[1] -> f32[0]); the result is empty either way.
  if (type == "IRFFT" && n.back() == 0 && in.shape.back() == 1) want_in_shape.back() = 1;
  if (in.shape != want_in_shape || out.shape != want_out_shape)
    ctx.fail(type, " with fft_length ", dims_str(n), " needs ",
             compiler::dtype_name(in.dtype), dims_str(want_in_shape), " -> ",
             compiler::dtype_name(out.dtype), dims_str(want_out_shape), ", got ", in.str(),
             " -> ", out.str());

  // An empty operand or result (a zero batch dim or n = 0) has nothing to
  // transform, and mx::fft rejects zero lengths ("Invalid FFT output size").
  mx::Shape out_shape = storage_shape(out);
  mx::Dtype out_dtype = to_mlx(out.dtype);
  if (in.num_elements() == 0 || out.num_elements() == 0)
    return unary([=](const mx::array&) { return mx::zeros(out_shape, out_dtype); });
  if (wide) return fft_f64(type, in, out, n);

  std::vector<int> axes;
  mx::Shape lengths;
  for (int64_t i = 0; i < k; ++i) {
    axes.push_back(static_cast<int>(rank - k + i));
    lengths.push_back(static_cast<int32_t>(n[i]));
  }
  if (type == "FFT")
    return unary([=](const mx::array& x) { return mx::fft::fftn(x, lengths, axes); });
  if (type == "IFFT")
    return unary([=](const mx::array& x) { return mx::fft::ifftn(x, lengths, axes); });
  if (type == "RFFT")
    return unary([=](const mx::array& x) { return mx::fft::rfftn(x, lengths, axes); });
  return unary([=](const mx::array& x) { return mx::fft::irfftn(x, lengths, axes); });
}

}  // namespace

void register_fft_ops(Registry& r) { r.add(compiler::Opcode::fft, lower_fft); }

}  // namespace pjrtx::backend
