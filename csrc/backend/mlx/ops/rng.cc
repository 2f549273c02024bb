// stablehlo.rng_bit_generator, bit for bit as XLA:CPU expands it (XLA's
// RngBitGeneratorExpander and its prng library). The state operand is u64:
// state[0] is the key, the rest a counter that the op advances by the number
// of blocks it draws; the key comes back unchanged. Output elements are 8,
// 16, 32 or 64 bits wide (any integer or float type, the bits reinterpreted);
// 8- and 16-bit ones are the low bits of u32 draws (the upper bits are
// thrown away, as in XLA).
//
// THREE_FRY (state u64[2]): Threefry-2x32, 20 rounds, keyed by state[0]; one
// block (two u32 words) per 64-bit counter value state[1] + i.
// PHILOX (state u64[2] or u64[3]): Philox-4x32, 10 rounds, keyed by
// state[0]; one block (four u32 words) per 128-bit counter value c + i,
// where c = (low state[1], high state[2]) for u64[3] and, for u64[2],
// (low state[1], high state[0]): the key doubles as the counter's high half
// and only the low half is written back.
// DEFAULT: PHILOX, as on XLA:CPU, whose compiler expands DEFAULT with
// RNG_PHILOX (RngBitGeneratorExpander's default algorithm there).
//
// All words are u32 MLX arrays (adds wrap mod 2^32); Philox's 32x32 -> 64
// multiplies run in u64. Rotation counts are constants in [6, 29].
#include <array>
#include <cstdint>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

mx::array u32c(uint32_t v) { return mx::array(v, mx::uint32); }
mx::array u64c(uint64_t v) { return mx::array(v, mx::uint64); }

mx::array lo32(const mx::array& x) { return mx::astype(x, mx::uint32); }
mx::array hi32(const mx::array& x) { return mx::astype(mx::right_shift(x, u64c(32)), mx::uint32); }
mx::array join64(const mx::array& lo, const mx::array& hi) {
  return mx::bitwise_or(mx::astype(lo, mx::uint64),
                        mx::left_shift(mx::astype(hi, mx::uint64), u64c(32)));
}

// Element i of a 1-D u64 array, as a scalar.
mx::array elem(const mx::array& v, int i) { return mx::reshape(mx::slice(v, {i}, {i + 1}), {}); }

// ---- Threefry-2x32 (Salmon et al., SC'11), 20 rounds --------------------------------

mx::array rotl(const mx::array& v, int r) {
  return mx::bitwise_or(mx::left_shift(v, u32c(r)), mx::right_shift(v, u32c(32 - r)));
}

std::pair<mx::array, mx::array> threefry2x32(mx::array x0, mx::array x1, const mx::array& key) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  // The third key word is the parity word 0x1BD11BDA ^ k0 ^ k1.
  mx::array k0 = lo32(key), k1 = hi32(key);
  const mx::array ks[3] = {k0, k1, mx::bitwise_xor(mx::bitwise_xor(u32c(0x1BD11BDA), k0), k1)};
  x0 = mx::add(x0, ks[0]);
  x1 = mx::add(x1, ks[1]);
  // Five groups of four rounds; after group g (1-based) the key schedule
  // injects ks[g % 3] and ks[(g + 1) % 3] + g.
  for (int g = 1; g <= 5; ++g) {
    const int* rot = kRotations + ((g - 1) % 2) * 4;
    for (int r = 0; r < 4; ++r) {
      x0 = mx::add(x0, x1);
      x1 = mx::bitwise_xor(x0, rotl(x1, rot[r]));
    }
    x0 = mx::add(x0, ks[g % 3]);
    x1 = mx::add(mx::add(x1, ks[(g + 1) % 3]), u32c(g));
  }
  return {x0, x1};
}

// u32 bits of `shape`. XLA splits the shape in halves along one dimension
// (the first of even size, else the first largest; a scalar counts as [1]
// -> [2]): block k of the row-major half shape fills positions 2k' and
// 2k'+1 of that dimension (k' = k's index there) with its two words, and
// an odd size drops the last one. The counter advances by the half's size.
std::pair<mx::array, mx::array> threefry_u32(const mx::array& key, const mx::array& ctr,
                                             const std::vector<int64_t>& shape) {
  std::vector<int64_t> half = shape.empty() ? std::vector<int64_t>{1} : shape;
  size_t split = 0;
  bool found = false;
  for (size_t i = 0; i < half.size() && !found; ++i)
    if (half[i] % 2 == 0) split = i, found = true;
  for (size_t i = 0; i < half.size() && !found; ++i)
    if (half[i] > half[split]) split = i;
  const int64_t full = half[split];
  half[split] = (full + 1) / 2;
  int64_t n = 1;
  for (int64_t d : half) n *= d;
  mx::array c = mx::add(ctr, mx::arange(0.0, static_cast<double>(n), mx::uint64));
  auto [x0, x1] = threefry2x32(lo32(c), hi32(c), key);
  mx::array next = mx::add(ctr, u64c(static_cast<uint64_t>(n)));
  if (shape.empty()) return {mx::reshape(x0, {}), next};
  std::vector<int64_t> pair_dims = half;
  pair_dims.insert(pair_dims.begin() + split + 1, 1);
  mx::array both = mx::concatenate({mx::reshape(x0, to_shape(pair_dims)),
                                    mx::reshape(x1, to_shape(pair_dims))},
                                   static_cast<int>(split) + 1);
  std::vector<int64_t> even = shape;
  even[split] = 2 * half[split];
  mx::array out = mx::reshape(both, to_shape(even));
  if (even[split] != full) {
    mx::Shape start(shape.size(), 0);
    out = mx::slice(out, start, to_shape(shape));
  }
  return {out, next};
}

// u64 bits: block i (row-major) gives word0 | word1 << 32.
std::pair<mx::array, mx::array> threefry_u64(const mx::array& key, const mx::array& ctr,
                                             const std::vector<int64_t>& shape, int64_t n) {
  mx::array c = mx::add(ctr, mx::arange(0.0, static_cast<double>(n), mx::uint64));
  auto [x0, x1] = threefry2x32(lo32(c), hi32(c), key);
  return {mx::reshape(join64(x0, x1), to_shape(shape)),
          mx::add(ctr, u64c(static_cast<uint64_t>(n)))};
}

// ---- Philox-4x32 (Salmon et al., SC'11), 10 rounds ----------------------------------

using Block4 = std::array<mx::array, 4>;

Block4 philox4x32(Block4 x, const mx::array& key) {
  mx::array k0 = lo32(key), k1 = hi32(key);
  for (int round = 0; round < 10; ++round) {
    mx::array p0 = mx::multiply(mx::astype(x[0], mx::uint64), u64c(0xD2511F53));
    mx::array p1 = mx::multiply(mx::astype(x[2], mx::uint64), u64c(0xCD9E8D57));
    x = Block4{mx::bitwise_xor(mx::bitwise_xor(hi32(p1), x[1]), k0), lo32(p1),
               mx::bitwise_xor(mx::bitwise_xor(hi32(p0), x[3]), k1), lo32(p0)};
    k0 = mx::add(k0, u32c(0x9E3779B9));
    k1 = mx::add(k1, u32c(0xBB67AE85));
  }
  return x;
}

// The 128-bit counter (lo, hi) plus a u64 (vector or scalar), with carry.
std::pair<mx::array, mx::array> add128(const mx::array& lo, const mx::array& hi,
                                       const mx::array& d) {
  mx::array sum = mx::add(lo, d);
  mx::array carry = mx::astype(mx::less(sum, lo), mx::uint64);
  return {sum, mx::add(hi, carry)};
}

// `words` u32 values from ceil(words / 4) blocks, block i's four words at
// 4i..4i+3; returns the words (1-D, flat) and the advanced counter.
struct PhiloxDraw {
  Block4 words;
  mx::array lo, hi;
};

PhiloxDraw philox_blocks(const mx::array& key, const mx::array& lo, const mx::array& hi,
                         int64_t words) {
  const int64_t blocks = (words + 3) / 4;
  auto [c_lo, c_hi] = add128(lo, hi, mx::arange(0.0, static_cast<double>(blocks), mx::uint64));
  Block4 out = philox4x32(Block4{lo32(c_lo), hi32(c_lo), lo32(c_hi), hi32(c_hi)}, key);
  auto [n_lo, n_hi] = add128(lo, hi, u64c(static_cast<uint64_t>(blocks)));
  return {out, n_lo, n_hi};
}

// Interleaves equal-length 1-D arrays (a0[0], a1[0], ..., a0[1], ...) and
// keeps the first n as `shape`.
mx::array interleave(const std::vector<mx::array>& parts, int64_t n,
                     const std::vector<int64_t>& shape) {
  mx::array flat = mx::flatten(mx::stack(parts, 1));
  flat = mx::slice(flat, {0}, {static_cast<int32_t>(n)});
  return mx::reshape(flat, to_shape(shape));
}

// ---- the op ---------------------------------------------------------------------------

enum class Algorithm { kThreeFry, kPhilox };

Kernel lower_rng_bit_generator(LowerCtx& ctx) {
  const std::string name = ctx.inst().attr_str("rng_algorithm", "DEFAULT");
  Algorithm alg;
  if (name == "THREE_FRY") alg = Algorithm::kThreeFry;
  else if (name == "PHILOX" || name == "DEFAULT") alg = Algorithm::kPhilox;  // XLA:CPU's default
  else ctx.fail("unsupported rng_algorithm ", name, " (expected DEFAULT, THREE_FRY or PHILOX)");

  const auto& st = ctx.in(0);
  if (st.dtype != DType::kU64 || st.shape.size() != 1)
    ctx.fail("expects a 1-D u64 state, got ", st.str());
  const int64_t state_len = st.shape[0];
  if (alg == Algorithm::kThreeFry && state_len != 2)
    ctx.fail("THREE_FRY needs a u64[2] state, got ", st.str());
  if (alg == Algorithm::kPhilox && state_len != 2 && state_len != 3)
    ctx.fail("PHILOX needs a u64[2] or u64[3] state, got ", st.str());

  // Signed and float outputs get the unsigned bits of their width,
  // reinterpreted (XLA:CPU does the same); bool and complex have no stream.
  const DType out_t = ctx.out(1).dtype;
  if (!compiler::is_integer(out_t) && !compiler::is_float(out_t))
    ctx.fail("generates integer or floating-point bits, got ", ctx.out(1).str());
  const int bits = compiler::dtype_bits(out_t);
  const std::vector<int64_t> shape = ctx.out(1).shape;
  const int64_t n = ctx.out(1).num_elements();
  const mx::Dtype bits_dt = unsigned_of_width(bits);
  const mx::Dtype out_dt = to_mlx(out_t);

  return [=](RunState&, const Arrays& in) -> Arrays {
    const mx::array& state = in[0];
    mx::array key = elem(state, 0);
    mx::array lo = elem(state, 1);
    mx::array bits_out = mx::array(0);
    std::vector<mx::array> next{key};
    if (alg == Algorithm::kThreeFry) {
      auto [b, c] = bits == 64 ? threefry_u64(key, lo, shape, n) : threefry_u32(key, lo, shape);
      bits_out = b;
      next.push_back(c);
    } else {
      mx::array hi = state_len == 3 ? elem(state, 2) : key;
      PhiloxDraw d = philox_blocks(key, lo, hi, bits == 64 ? 2 * n : n);
      const Block4& w = d.words;
      bits_out = bits == 64
                     ? interleave({join64(w[0], w[1]), join64(w[2], w[3])}, n, shape)
                     : interleave({w[0], w[1], w[2], w[3]}, n, shape);
      next.push_back(d.lo);
      if (state_len == 3) next.push_back(d.hi);
    }
    if (bits < 32) bits_out = mx::astype(bits_out, bits_dt);  // the low bits, as XLA's convert
    if (bits_out.dtype() != out_dt) bits_out = mx::view(bits_out, out_dt);
    std::vector<mx::array> parts;
    for (const auto& v : next) parts.push_back(mx::reshape(v, {1}));
    return Arrays{mx::concatenate(parts, 0), bits_out};
  };
}

}  // namespace

void register_rng_ops(Registry& r) {
  r.add(compiler::Opcode::rng_bit_generator, lower_rng_bit_generator);
}

}  // namespace pjrtx::backend
