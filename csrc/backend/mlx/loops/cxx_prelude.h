// The C++ every emitted host loop starts with (loops/emit_cxx.cc): value
// buffers and one helper per StableHLO element op, with XLA:CPU's answers at
// the edges. Kept apart from the emitter so the semantics read in one place.
//
// Buffers: V<T, N> holds a small value in place (copied by value), B<T, N> a
// larger one on the heap (moved, so an op that consumes its operand at its
// last use updates it in place); C<T> views constant or input data. All
// three expose `d`, the elements in row-major order. pred is C++ bool, so
// add/multiply/subtract on it are or/and/xor as StableHLO's i1 arithmetic.
#pragma once

namespace pjrtx::backend::loops {

inline constexpr const char* kCxxPrelude = R"CXX(
// No system header: a build parsed <cmath>, <algorithm> and friends even
// precompiled (~40 ms of a small loop's ~150 ms build, and a 19 MB header
// per cache); without them this text parses in a millisecond and goes into
// each source as it is. The prelude names what it uses: fixed-width integers from the
// compiler's own macros, math through __builtin_* (the libm functions
// <cmath> calls, so the same answers), memory through __builtin_malloc and
// __builtin_free (malloc itself, and the compiler knows its result aliases
// nothing: through the global operator new GCC kept the bench's bufloop
// buffer in memory, 820 us a call against 70 us). GCC and Clang both.
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;

namespace {

template <class A, class B> struct same_t {
  static constexpr bool v = false;
};
template <class A> struct same_t<A, A> {
  static constexpr bool v = true;
};
template <bool C, class A, class B> struct cond_t {
  using type = A;
};
template <class A, class B> struct cond_t<false, A, B> {
  using type = B;
};
// Per integer type: its unsigned and signed types of the same width.
template <class T> struct ints {};
template <> struct ints<int8_t> { using u = uint8_t; using s = int8_t; static constexpr bool sgn = true; };
template <> struct ints<int16_t> { using u = uint16_t; using s = int16_t; static constexpr bool sgn = true; };
template <> struct ints<int32_t> { using u = uint32_t; using s = int32_t; static constexpr bool sgn = true; };
template <> struct ints<int64_t> { using u = uint64_t; using s = int64_t; static constexpr bool sgn = true; };
template <> struct ints<uint8_t> { using u = uint8_t; using s = int8_t; static constexpr bool sgn = false; };
template <> struct ints<uint16_t> { using u = uint16_t; using s = int16_t; static constexpr bool sgn = false; };
template <> struct ints<uint32_t> { using u = uint32_t; using s = int32_t; static constexpr bool sgn = false; };
template <> struct ints<uint64_t> { using u = uint64_t; using s = int64_t; static constexpr bool sgn = false; };
template <class T> using U = typename ints<T>::u;
template <class T> constexpr bool is_signed = ints<T>::sgn;
template <class T> constexpr T imax() {
  return static_cast<T>(static_cast<U<T>>(~U<T>(0)) >> (is_signed<T> ? 1 : 0));
}
template <class T> constexpr T imin() { return is_signed<T> ? static_cast<T>(-imax<T>() - 1) : T(0); }
template <class T> constexpr T&& mv(T& x) noexcept { return static_cast<T&&>(x); }

// Math on float and double, as <cmath>'s overloads: m_exp(x) and so on.
#define PJRTX_M1(fn) \
  inline float m_##fn(float x) { return __builtin_##fn##f(x); } \
  inline double m_##fn(double x) { return __builtin_##fn(x); }
#define PJRTX_M2(fn) \
  inline float m_##fn(float x, float y) { return __builtin_##fn##f(x, y); } \
  inline double m_##fn(double x, double y) { return __builtin_##fn(x, y); }
PJRTX_M1(sqrt) PJRTX_M1(cbrt) PJRTX_M1(exp) PJRTX_M1(expm1) PJRTX_M1(log) PJRTX_M1(log1p)
PJRTX_M1(sin) PJRTX_M1(cos) PJRTX_M1(tan) PJRTX_M1(tanh) PJRTX_M1(floor) PJRTX_M1(ceil)
PJRTX_M1(erf) PJRTX_M1(acos) PJRTX_M1(asin) PJRTX_M1(acosh) PJRTX_M1(atanh) PJRTX_M1(sinh)
PJRTX_M1(cosh) PJRTX_M1(fabs) PJRTX_M1(nearbyint) PJRTX_M1(round)
PJRTX_M2(fmod) PJRTX_M2(pow) PJRTX_M2(atan2)
#undef PJRTX_M1
#undef PJRTX_M2
inline float m_fma(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
inline double m_fma(double x, double y, double z) { return __builtin_fma(x, y, z); }

struct OutOfMemory {};  // the entry point's catch (...) returns 1
template <class T, long N> struct V {
  T d[N > 0 ? N : 1];
  void ensure() {}
};
// B<T, N> b{nullptr} holds no storage yet: a result that is moved in (a
// call's or a branch's) costs no allocation; copy_into allocates it first.
template <class T, long N> struct B {
  T* d;
  B() : d(static_cast<T*>(__builtin_malloc(sizeof(T) * (N > 0 ? N : 1)))) {
    if (!d) throw OutOfMemory{};
  }
  explicit B(decltype(nullptr)) : d(nullptr) {}
  void ensure() {
    if (!d) *this = B();
  }
  B(const B& o) : B() { __builtin_memcpy(d, o.d, sizeof(T) * N); }
  B(B&& o) noexcept : d(o.d) { o.d = nullptr; }
  B& operator=(const B& o) {
    if (this != &o) __builtin_memcpy(d, o.d, sizeof(T) * N);
    return *this;
  }
  B& operator=(B&& o) noexcept {
    T* t = d;
    d = o.d;
    o.d = t;
    return *this;
  }
  ~B() { __builtin_free(d); }
};
template <class T> struct C {
  const T* d;
};
// Copies n elements of any buffer into a fresh R.
template <class R, class S> R copy_as(const S& s, long n) {
  R r;
  if (n) __builtin_memcpy(r.d, s.d, sizeof(r.d[0]) * n);
  return r;
}
template <class R, class S> void copy_into(R& r, const S& s, long n) {
  r.ensure();
  if (n) __builtin_memcpy(r.d, s.d, sizeof(r.d[0]) * n);
}

// Float literals by their bits. Where the compiler has __builtin_bit_cast
// (GCC 11, Clang 9) they are constant expressions, so a constant array in a
// loop (`static const float cst[] = {F(...), ...}`) is data, not a guarded
// first-run initialisation that needs the C++ runtime (cxx_build.cc links
// plain code without it).
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define PJRTX_BIT_CAST 1
#endif
#endif
#ifdef PJRTX_BIT_CAST
constexpr float F(uint32_t u) { return __builtin_bit_cast(float, u); }
constexpr double D(uint64_t u) { return __builtin_bit_cast(double, u); }
#else
inline float F(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
inline double D(uint64_t u) { double f; __builtin_memcpy(&f, &u, 8); return f; }
#endif

template <class T> constexpr bool is_f = same_t<T, float>::v || same_t<T, double>::v;
template <class T> constexpr bool is_b = same_t<T, bool>::v;

// complex<f32> and complex<f64> (pjrtx stores c128 as f64 pairs, the same
// bytes). The emitter takes only + - * and negation on them, computed part
// by part as XLA:CPU does, == and !=, converts into complex,
// real/imag/complex and data movement; anything else keeps the loop on MLX.
// XLA:CPU's product (a + bi)(c + di) is fma(a, c, -(b d)) + fma(b, c, a d) i
// on FMA hardware (every arm64 and x86-64 since 2013; measured: 0 of 100,000
// random products differ from it, 25% differ from the unfused formula in a
// last bit), with no Annex G recovery of infinities.
template <class T> struct cx {
  T re, im;
};
template <class T> struct is_cx {
  static constexpr bool v = false;
};
template <class T> struct is_cx<cx<T>> {
  static constexpr bool v = true;
};
template <class T> constexpr bool is_c = is_cx<T>::v;
// Integers (pred is bool, apart).
template <class T> constexpr bool is_i = !is_f<T> && !is_b<T> && !is_c<T>;
template <class T> inline bool operator==(cx<T> a, cx<T> b) { return a.re == b.re && a.im == b.im; }
template <class T> inline bool operator!=(cx<T> a, cx<T> b) { return !(a == b); }

// Integer + - * wrap (computed unsigned); pred + is or, - is xor, * is and.
template <class T> inline T h_add(T a, T b) {
  if constexpr (is_c<T>) return T{a.re + b.re, a.im + b.im};
  else if constexpr (is_f<T>) return a + b;
  else if constexpr (is_b<T>) return a || b;
  else return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <class T> inline T h_sub(T a, T b) {
  if constexpr (is_c<T>) return T{a.re - b.re, a.im - b.im};
  else if constexpr (is_f<T>) return a - b;
  else if constexpr (is_b<T>) return a != b;
  else return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <class T> inline T h_mul(T a, T b) {
  if constexpr (is_c<T>) return T{m_fma(a.re, b.re, -(a.im * b.im)), m_fma(a.im, b.re, a.re * b.im)};
  else if constexpr (is_f<T>) return a * b;
  else if constexpr (is_b<T>) return a && b;
  else return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
// One step of a dot's sum, in the contracted index's order: a float
// product goes into the accumulator with one FMA (acc = fma(a, b, acc)), as
// XLA:CPU's loop-emitted dots and MLX's CPU matmul round small products
// (emit_dot in emit_cxx_arrays.cc has the measurements).
template <class T> inline T h_dot_step(T acc, T a, T b) {
  if constexpr (is_f<T>) return m_fma(a, b, acc);
  else return h_add(acc, h_mul(a, b));
}
// x / 0 is all ones and x % 0 is x; MIN / -1 is MIN and MIN % -1 is 0.
template <class T> inline T h_div(T a, T b) {
  if constexpr (is_f<T>) return a / b;
  else {
    if (b == 0) return static_cast<T>(~U<T>(0));
    if constexpr (is_signed<T>)
      if (a == imin<T>() && b == T(-1)) return a;
    return static_cast<T>(a / b);
  }
}
template <class T> inline T h_rem(T a, T b) {
  if constexpr (is_f<T>) return m_fmod(a, b);
  else {
    if (b == 0) return a;
    if constexpr (is_signed<T>)
      if (a == imin<T>() && b == T(-1)) return 0;
    return static_cast<T>(a % b);
  }
}
// XLA's max/min: NaN propagates; max(-0, +0) = +0, min(-0, +0) = -0.
template <class T> inline T h_max(T a, T b) {
  if constexpr (is_f<T>) {
    if (a == b) return a == 0 ? a + b : a;
    if (a != a) return a;
    return a > b ? a : b;
  } else return a > b ? a : b;
}
template <class T> inline T h_min(T a, T b) {
  if constexpr (is_f<T>) {
    if (a == b) return a == 0 ? -((-a) + (-b)) : a;
    if (a != a) return a;
    return a < b ? a : b;
  } else return a < b ? a : b;
}
template <class T> inline T h_pow(T a, T b) {
  if constexpr (is_f<T>) return m_pow(a, b);
  else if constexpr (is_b<T>) return a || !b;
  else {
    if constexpr (is_signed<T>) {
      if (b < 0) return a == 1 ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
    }
    T r = 1;
    U<T> e = static_cast<U<T>>(b);
    while (e) {
      if (e & 1) r = h_mul(r, a);
      a = h_mul(a, a);
      e >>= 1;
    }
    return r;
  }
}
template <class T> inline T h_and(T a, T b) { if constexpr (is_b<T>) return a && b; else return a & b; }
template <class T> inline T h_or(T a, T b) { if constexpr (is_b<T>) return a || b; else return a | b; }
template <class T> inline T h_xor(T a, T b) { if constexpr (is_b<T>) return a != b; else return a ^ b; }
template <class T> inline T h_not(T a) { if constexpr (is_b<T>) return !a; else return static_cast<T>(~a); }
template <class T> inline T h_neg(T a) {
  if constexpr (is_c<T>) return T{-a.re, -a.im};
  else if constexpr (is_f<T>) return -a;
  else return static_cast<T>(uint64_t(0) - static_cast<uint64_t>(a));
}
template <class T> inline T h_abs(T a) {
  if constexpr (is_f<T>) return m_fabs(a);
  else if constexpr (is_signed<T>) return a < 0 ? h_neg(a) : a;
  else return a;
}
template <class T> inline T h_sign(T a) {
  if constexpr (is_f<T>) return (a != a || a == 0) ? a : (a > 0 ? T(1) : T(-1));
  else if constexpr (is_signed<T>) return a > 0 ? T(1) : a < 0 ? T(-1) : T(0);
  else return a > 0 ? T(1) : T(0);
}
// A shift count outside [0, bits), read as unsigned, gives 0 or the sign
// fill; an arithmetic shift of an unsigned value shifts in its top bit.
template <class T> inline T h_shl(T a, T b) {
  constexpr unsigned bits = sizeof(T) * 8;
  U<T> n = static_cast<U<T>>(b);
  return n >= bits ? T(0) : static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) << n));
}
template <class T> inline T h_shrl(T a, T b) {
  constexpr unsigned bits = sizeof(T) * 8;
  U<T> n = static_cast<U<T>>(b);
  return n >= bits ? T(0) : static_cast<T>(static_cast<U<T>>(a) >> n);
}
template <class T> inline T h_shra(T a, T b) {
  constexpr unsigned bits = sizeof(T) * 8;
  using S = typename ints<T>::s;
  U<T> n = static_cast<U<T>>(b);
  S s = static_cast<S>(a);
  if (n >= bits) return static_cast<T>(s < 0 ? S(-1) : S(0));
  return static_cast<T>(static_cast<S>(s >> n));
}
template <class T> inline T h_popcnt(T a) {
  return static_cast<T>(__builtin_popcountll(static_cast<unsigned long long>(static_cast<U<T>>(a))));
}
template <class T> inline T h_clz(T a) {
  constexpr int bits = sizeof(T) * 8;
  unsigned long long u = static_cast<unsigned long long>(static_cast<U<T>>(a));
  return static_cast<T>(u == 0 ? bits : __builtin_clzll(u) - (64 - bits));
}
template <class T> inline T h_atan2(T a, T b) { return m_atan2(a, b); }
template <class T> inline T h_rsqrt(T a) { return T(1) / m_sqrt(a); }
template <class T> inline T h_logistic(T a) { return T(1) / (T(1) + m_exp(-a)); }
template <class T> inline bool h_isfinite(T a) { return __builtin_isfinite(a); }
template <class T> inline T h_rne(T a) { return m_nearbyint(a); }
template <class T> inline T h_afz(T a) { return m_round(a); }
// Compare with TOTALORDER: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
template <class T> inline auto h_tot(T a) {
  using I = typename cond_t<sizeof(T) == 4, int32_t, int64_t>::type;
  I i;
  __builtin_memcpy(&i, &a, sizeof i);
  return i < 0 ? static_cast<I>(i ^ imax<I>()) : i;
}
// convert: float -> int saturates with NaN -> 0; any -> pred is != 0; int
// -> int wraps; pred -> any is 0 or 1; a real -> complex is (x, 0).
template <class To, class From> inline To cv(From x) {
  if constexpr (same_t<To, From>::v) return x;
  else if constexpr (is_c<To>) {
    using P = decltype(To::re);
    if constexpr (is_c<From>) return To{static_cast<P>(x.re), static_cast<P>(x.im)};
    else return To{static_cast<P>(x), P(0)};
  }
  else if constexpr (is_b<To>) return x != From(0);
  else if constexpr (is_f<From> && is_i<To>) {
    if (x != x) return To(0);
    if (x <= static_cast<From>(imin<To>())) return imin<To>();
    if (x >= static_cast<From>(imax<To>())) return imax<To>();
    return static_cast<To>(x);
  } else if constexpr (is_i<From> && is_i<To>) {
    return static_cast<To>(static_cast<U<To>>(static_cast<uint64_t>(x)));
  } else return static_cast<To>(x);
}
template <class To, class From> inline To bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast_convert of one width");
  To t;
  __builtin_memcpy(&t, &x, sizeof t);
  return t;
}
inline long clampi(long v, long lo, long hi) { return v < lo ? lo : v > hi ? hi : v; }
template <class T> inline long idx(T v) {
  constexpr long kMax = static_cast<long>(~0ul >> 1);
  if constexpr (!is_signed<T>) return v > static_cast<unsigned long>(kMax) ? kMax : static_cast<long>(v);
  else return static_cast<long>(v);
}
// A stable merge sort of idx[0..n) by less(a, b): any comparator, even one
// that is not a strict weak order, ends in some permutation (std::sort may
// run off the array then).
template <class F> void msort(long* idx, long* tmp, long n, F&& less) {
  for (long w = 1; w < n; w *= 2) {
    for (long lo = 0; lo < n; lo += 2 * w) {
      long mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = less(idx[j], idx[i]) ? idx[j++] : idx[i++];
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
    }
    __builtin_memcpy(idx, tmp, sizeof(long) * n);
  }
}

// stablehlo.rng_bit_generator as XLA:CPU expands it (ops/rng.cc has the
// same streams on MLX, and the layouts' reasons): Threefry-2x32 with 20
// rounds and Philox-4x32 with 10, keyed by s[0]. Words narrower than 32
// bits are the low bits of u32 draws; ns gets the advanced state.
inline void rbg_threefry2x32(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  static constexpr int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  x0 += ks[0];
  x1 += ks[1];
  for (int g = 1; g <= 5; ++g) {
    const int* r = rot + ((g - 1) % 2) * 4;
    for (int i = 0; i < 4; ++i) {
      x0 += x1;
      x1 = ((x1 << r[i]) | (x1 >> (32 - r[i]))) ^ x0;
    }
    x0 += ks[g % 3];
    x1 += ks[(g + 1) % 3] + static_cast<uint32_t>(g);
  }
}
inline void rbg_philox4x32(uint32_t x[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(x[0]) * 0xD2511F53u;
    const uint64_t p1 = static_cast<uint64_t>(x[2]) * 0xCD9E8D57u;
    const uint32_t y0 = static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ k0;
    const uint32_t y2 = static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ k1;
    x[0] = y0;
    x[1] = static_cast<uint32_t>(p1);
    x[2] = y2;
    x[3] = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
template <class W> inline void rbg_put(void* out, long i, W w) {
  __builtin_memcpy(static_cast<unsigned char*>(out) + i * static_cast<long>(sizeof(W)), &w, sizeof(W));
}
// Threefry, words of W up to 32 bits. The shape is [outer, full, inner]
// around XLA's split dimension; block (o, j, i) of the half shape
// [outer, ceil(full / 2), inner] (row-major, counter s[1] + its index)
// fills (o, 2j, i) and, within the shape, (o, 2j + 1, i).
template <class W> void rbg_threefry_narrow(const uint64_t* s, uint64_t* ns, void* out, long outer, long full,
                                            long inner) {
  const long half = (full + 1) / 2;
  const uint32_t k0 = static_cast<uint32_t>(s[0]), k1 = static_cast<uint32_t>(s[0] >> 32);
  for (long o = 0; o < outer; ++o)
    for (long j = 0; j < half; ++j)
      for (long i = 0; i < inner; ++i) {
        const uint64_t c = s[1] + static_cast<uint64_t>((o * half + j) * inner + i);
        uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32);
        rbg_threefry2x32(k0, k1, x0, x1);
        rbg_put<W>(out, (o * full + 2 * j) * inner + i, static_cast<W>(x0));
        if (2 * j + 1 < full) rbg_put<W>(out, (o * full + 2 * j + 1) * inner + i, static_cast<W>(x1));
      }
  ns[0] = s[0];
  ns[1] = s[1] + static_cast<uint64_t>(outer * half * inner);
}
// Threefry, 64-bit words: block k (counter s[1] + k) gives word k.
inline void rbg_threefry_wide(const uint64_t* s, uint64_t* ns, void* out, long n) {
  const uint32_t k0 = static_cast<uint32_t>(s[0]), k1 = static_cast<uint32_t>(s[0] >> 32);
  for (long k = 0; k < n; ++k) {
    const uint64_t c = s[1] + static_cast<uint64_t>(k);
    uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32);
    rbg_threefry2x32(k0, k1, x0, x1);
    rbg_put<uint64_t>(out, k, static_cast<uint64_t>(x0) | (static_cast<uint64_t>(x1) << 32));
  }
  ns[0] = s[0];
  ns[1] = s[1] + static_cast<uint64_t>(n);
}
// Philox: block b's counter is the 128-bit (lo, hi) + b, with lo = s[1] and
// hi = s[2] for a u64[3] state, s[0] (the key) for u64[2]; its four words
// are words 4b..4b+3 of the output, or two u64s (w0 | w1 << 32, w2 | w3 <<
// 32) at 2b and 2b+1.
template <class W> void rbg_philox(const uint64_t* s, uint64_t* ns, long len, void* out, long n) {
  constexpr bool wide = sizeof(W) == 8;
  const long words = wide ? 2 * n : n, blocks = (words + 3) / 4;
  const uint64_t lo = s[1], hi = len == 3 ? s[2] : s[0];
  const uint32_t k0 = static_cast<uint32_t>(s[0]), k1 = static_cast<uint32_t>(s[0] >> 32);
  for (long b = 0; b < blocks; ++b) {
    const uint64_t clo = lo + static_cast<uint64_t>(b), chi = hi + (clo < lo ? 1u : 0u);
    uint32_t x[4] = {static_cast<uint32_t>(clo), static_cast<uint32_t>(clo >> 32), static_cast<uint32_t>(chi),
                     static_cast<uint32_t>(chi >> 32)};
    rbg_philox4x32(x, k0, k1);
    if constexpr (wide) {
      for (long h = 0; h < 2; ++h)
        if (2 * b + h < n)
          rbg_put<uint64_t>(out, 2 * b + h, static_cast<uint64_t>(x[2 * h]) | (static_cast<uint64_t>(x[2 * h + 1]) << 32));
    } else {
      for (long w = 0; w < 4; ++w)
        if (4 * b + w < n) rbg_put<W>(out, 4 * b + w, static_cast<W>(x[w]));
    }
  }
  const uint64_t next = lo + static_cast<uint64_t>(blocks);
  ns[0] = s[0];
  ns[1] = next;
  if (len == 3) ns[2] = hi + (next < lo ? 1u : 0u);
}

}  // namespace

// What the engine passes a loop (host_loop.cc, HostCalls): call(self, k,
// args, results) runs the loop's host callback k and returns nonzero when it
// failed (the engine keeps the error). The entry point sets t_calls for the
// functions it calls; a failed callback unwinds the loop as CallbackFailed.
struct pjrtx_host_calls {
  int (*call)(void* self, long k, const void* const* args, void* const* results);
  void* self;
};
namespace {
struct CallbackFailed {};
thread_local const pjrtx_host_calls* t_calls = nullptr;
struct CallsScope {
  const pjrtx_host_calls* saved;
  explicit CallsScope(const pjrtx_host_calls* c) : saved(t_calls) { t_calls = c; }
  ~CallsScope() { t_calls = saved; }
};
inline void host_call(long k, const void* const* args, void* const* results) {
  if (!t_calls || t_calls->call(t_calls->self, k, args, results)) throw CallbackFailed{};
}
}  // namespace
)CXX";

}  // namespace pjrtx::backend::loops
