#include "compiler/plan.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <cstring>
#include <sstream>

#include "common/error.h"

namespace pjrtx::compiler {

namespace {

template <typename T>
const T& get_attr(const Instruction& inst, std::string_view name,
                  const char* kind) {
  auto it = inst.attrs.find(name);
  if (it == inst.attrs.end())
    invalid_argument("[", opcode_name(inst.op), "] missing attribute '", name,
                     "' at ", inst.loc);
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  invalid_argument("[", opcode_name(inst.op), "] attribute '", name,
                   "' is not ", kind, ": ", attr_to_string(it->second), " at ",
                   inst.loc);
}

template <typename T>
void join(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float f;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    f = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  uint32_t bits = sign | (exp == 31 ? (0xffu << 23) | (man << 13)
                                    : ((exp + 112) << 23) | (man << 13));
  std::memcpy(&f, &bits, 4);
  return f;
}

// One element of dense data as text; floats keep every digit that matters
// (%.9g for f32, %.17g for f64) so a printed plan shows exact constants.
void dense_element(std::ostringstream& os, const DenseData& d, size_t i) {
  const uint8_t* p = d.bytes.data() + i * dtype_size(d.type.dtype);
  auto load = [p](auto zero, size_t off = 0) {
    decltype(zero) v;
    std::memcpy(&v, p + off, sizeof v);
    return v;
  };
  auto real = [&os](double v, int digits) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    os << buf;
  };
  switch (d.type.dtype) {
    case DType::kPred: os << (load(uint8_t{}) ? "true" : "false"); break;
    case DType::kS8: os << int(load(int8_t{})); break;
    // 4-bit values sit in a byte's low nibble (ml_dtypes' int4 bytes).
    case DType::kS4: os << (((load(uint8_t{}) & 15) ^ 8) - 8); break;
    case DType::kU4: os << (load(uint8_t{}) & 15); break;
    case DType::kS2: os << (((load(uint8_t{}) & 3) ^ 2) - 2); break;
    case DType::kU2: os << (load(uint8_t{}) & 3); break;
    case DType::kS16: os << load(int16_t{}); break;
    case DType::kS32: os << load(int32_t{}); break;
    case DType::kS64: os << load(int64_t{}); break;
    case DType::kU8: os << unsigned(load(uint8_t{})); break;
    case DType::kU16: os << load(uint16_t{}); break;
    case DType::kU32: os << load(uint32_t{}); break;
    case DType::kU64: os << load(uint64_t{}); break;
    case DType::kF16: real(half_to_float(load(uint16_t{})), 9); break;
    case DType::kBF16: {
      uint32_t bits = uint32_t(load(uint16_t{})) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      real(f, 9);
      break;
    }
    case DType::kF32: real(load(float{}), 9); break;
    case DType::kF64: real(load(double{}), 17); break;
    case DType::kC64:
      os << '(';
      real(load(float{}), 9);
      os << ',';
      real(load(float{}, 4), 9);
      os << ')';
      break;
    case DType::kC128:
      os << '(';
      real(load(double{}), 17);
      os << ',';
      real(load(double{}, 8), 17);
      os << ')';
      break;
    default:
      // Small floats print as their stored byte: a decoder would duplicate
      // the back end's tables for a debugging aid.
      if (is_small_float(d.type.dtype)) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02x", unsigned(load(uint8_t{})));
        os << buf;
      } else {
        os << '?';
      }
  }
}

// "dense<f32[4] splat 1.5>", "dense<s32[3] [1,2,3]>"; more than 16
// elements print as the first 8 and the last 2, so dumps of programs with
// large constants stay readable.
void dense_to_string(std::ostringstream& os, const DenseData& d) {
  os << "dense<" << d.type.str();
  size_t esize = static_cast<size_t>(dtype_size(d.type.dtype));
  size_t n = esize == 0 ? 0 : d.bytes.size() / esize;
  if (d.splat) {
    os << " splat ";
    if (n >= 1) dense_element(os, d, 0);
  } else {
    os << " [";
    for (size_t i = 0; i < n; ++i) {
      if (n > 16 && i == 8) {
        os << ",...";
        i = n - 2;
      }
      if (i) os << ',';
      dense_element(os, d, i);
    }
    os << ']';
  }
  os << '>';
}

}  // namespace

std::string attr_to_string(const AttrValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          os << "unit";
        } else if constexpr (std::is_same_v<T, bool>) {
          os << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, int64_t> ||
                             std::is_same_v<T, double>) {
          os << x;
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << '"' << x << '"';
        } else if constexpr (std::is_same_v<T, std::shared_ptr<const DenseData>>) {
          dense_to_string(os, *x);
        } else {
          join(os, x);
        }
      },
      v);
  return os.str();
}

int64_t Instruction::attr_int(std::string_view name) const {
  auto it = attrs.find(name);
  if (it != attrs.end())
    if (const bool* b = std::get_if<bool>(&it->second)) return *b;
  return get_attr<int64_t>(*this, name, "an integer");
}
int64_t Instruction::attr_int(std::string_view name, int64_t dflt) const {
  return has(name) ? attr_int(name) : dflt;
}
bool Instruction::attr_bool(std::string_view name, bool dflt) const {
  auto it = attrs.find(name);
  if (it == attrs.end()) return dflt;
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return *i != 0;
  return get_attr<bool>(*this, name, "a bool");
}
double Instruction::attr_float(std::string_view name) const {
  auto it = attrs.find(name);
  if (it != attrs.end())
    if (const int64_t* i = std::get_if<int64_t>(&it->second))
      return static_cast<double>(*i);
  return get_attr<double>(*this, name, "a float");
}
const std::string& Instruction::attr_str(std::string_view name) const {
  return get_attr<std::string>(*this, name, "a string");
}
std::string Instruction::attr_str(std::string_view name,
                                  const std::string& dflt) const {
  return has(name) ? attr_str(name) : dflt;
}
const std::vector<int64_t>& Instruction::attr_ints(std::string_view name) const {
  auto it = attrs.find(name);
  // An empty list may arrive as any empty array kind.
  if (it != attrs.end()) {
    static const std::vector<int64_t> kEmpty;
    if (auto* d = std::get_if<std::vector<double>>(&it->second); d && d->empty())
      return kEmpty;
    if (auto* s = std::get_if<std::vector<std::string>>(&it->second); s && s->empty())
      return kEmpty;
  }
  return get_attr<std::vector<int64_t>>(*this, name, "an integer list");
}
std::vector<int64_t> Instruction::attr_ints(
    std::string_view name, const std::vector<int64_t>& dflt) const {
  return has(name) ? attr_ints(name) : dflt;
}
const DenseData& Instruction::attr_dense(std::string_view name) const {
  return *get_attr<std::shared_ptr<const DenseData>>(*this, name,
                                                     "dense elements");
}

const std::shared_ptr<const DenseData>& Instruction::attr_dense_ptr(std::string_view name) const {
  return get_attr<std::shared_ptr<const DenseData>>(*this, name, "dense elements");
}

std::vector<int64_t> Instruction::attr_dense_ints(std::string_view name) const {
  const DenseData& d = attr_dense(name);
  const DType t = d.type.dtype;
  auto fail = [&](const std::string& why) {
    invalid_argument("[", opcode_name(op), "] attribute '", name, "' (", d.type.str(), ") ", why,
                     " at ", loc);
  };
  if (!is_integer(t) || dtype_bits(t) < 8) fail("must hold 8- to 64-bit integers");
  const int64_t count = d.type.num_elements();
  const size_t width = static_cast<size_t>(dtype_size(t));
  const size_t stored = d.splat ? 1 : static_cast<size_t>(count);
  if (d.bytes.size() != stored * width)
    fail("holds " + std::to_string(d.bytes.size()) + " bytes, expected " +
         std::to_string(stored * width));
  std::vector<int64_t> out(static_cast<size_t>(count));
  const bool is_signed = is_signed_int(t);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = d.bytes.data() + (d.splat ? 0 : i * width);
    uint64_t raw = 0;
    std::memcpy(&raw, p, width);  // little-endian, as the frontend writes
    if (is_signed && width < 8 && (raw >> (8 * width - 1)) & 1)
      raw |= ~uint64_t{0} << (8 * width);  // sign-extend
    out[i] = static_cast<int64_t>(raw);
  }
  return out;
}

std::string Instruction::where() const {
  std::string s(opcode_name(op));
  if (!loc.empty()) s += " at " + loc;
  return s;
}

const Function* Plan::find_function(std::string_view name) const {
  for (const auto& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

namespace {
size_t count(const Region& r) {
  size_t n = 0;
  for (const auto& inst : r.body) {
    ++n;
    for (const auto& sub : inst.regions) n += count(sub);
  }
  return n;
}
}  // namespace

size_t Plan::num_instructions() const {
  size_t n = 0;
  for (const auto& f : functions) n += count(f.body);
  return n;
}

namespace {
uint8_t* malloc_bytes(size_t n, void** handle) {
  *handle = nullptr;
  return static_cast<uint8_t*>(std::malloc(n));
}
void free_bytes(void*, uint8_t* data) { std::free(data); }
const DenseStorage kMallocStorage{malloc_bytes, free_bytes};
std::atomic<const DenseStorage*> g_dense_storage{&kMallocStorage};
}  // namespace

void set_dense_storage(const DenseStorage* storage) {
  g_dense_storage = storage ? storage : &kMallocStorage;
}

DenseBytes& DenseBytes::operator=(const DenseBytes& other) {
  if (this != &other) assign(other.begin(), other.end());
  return *this;
}

DenseBytes& DenseBytes::operator=(DenseBytes&& other) noexcept {
  if (this != &other) {
    reset();
    swap(other);
  }
  return *this;
}

void DenseBytes::swap(DenseBytes& o) noexcept {
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  std::swap(handle_, o.handle_);
  std::swap(storage_, o.storage_);
}

void DenseBytes::reset() {
  if (storage_ != nullptr && (data_ != nullptr || handle_ != nullptr))
    storage_->release(handle_, data_);
  data_ = nullptr;
  size_ = 0;
  handle_ = nullptr;
  storage_ = nullptr;
}

void DenseBytes::resize(size_t n) {
  if (n == size_) return;
  DenseBytes next;
  if (n > 0) {
    const DenseStorage* st = g_dense_storage.load();
    if (n < st->min_bytes) st = &kMallocStorage;
    next.data_ = st->alloc(n, &next.handle_);
    if (next.data_ == nullptr) throw std::bad_alloc();
    next.storage_ = st;
    next.size_ = n;
    size_t keep = std::min(n, size_);
    if (keep) std::memcpy(next.data_, data_, keep);
    if (n > keep) std::memset(next.data_ + keep, 0, n - keep);
  }
  reset();
  swap(next);
}

void DenseBytes::assign(const uint8_t* first, const uint8_t* last) {
  size_t n = static_cast<size_t>(last - first);
  DenseBytes next;
  next.resize(n);
  if (n) std::memcpy(next.data_, first, n);
  reset();
  swap(next);
}

}  // namespace pjrtx::compiler
