#include "compiler/serialize.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.h"

namespace pjrtx::compiler {

namespace {

constexpr char kMagic[8] = {'P', 'J', 'R', 'T', 'X', 'P', 'L', 'N'};
// Regions nest as deep as the program's control flow; a real program stays
// far below this, and the bound keeps a hostile blob from exhausting the
// stack through recursion.
constexpr int kMaxDepth = 512;

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { fixed(v); }
  void u64(uint64_t v) { fixed(v); }
  void i64(int64_t v) { fixed(static_cast<uint64_t>(v)); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    fixed(bits);
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  template <typename T, typename F>
  void list(const std::vector<T>& v, F&& each) {
    u64(v.size());
    for (const auto& x : v) each(x);
  }
  std::string take() { return std::move(out_); }

 private:
  template <typename U>
  void fixed(U v) {
    for (size_t i = 0; i < sizeof(U); ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

bool valid_utf8(const char* s, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(s);
  for (size_t i = 0; i < n;) {
    uint8_t c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    for (size_t k = 1; k < len; ++k)
      if ((p[i + k] & 0xc0) != 0x80) return false;
    i += len;
  }
  return true;
}

class Reader {
 public:
  explicit Reader(std::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  bool done() const { return p_ == end_; }

  uint8_t u8() { return static_cast<uint8_t>(fixed<uint8_t>()); }
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  int64_t i64() { return static_cast<int64_t>(fixed<uint64_t>()); }
  double f64() {
    uint64_t bits = fixed<uint64_t>();
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  const char* raw(size_t n, const char* what) {
    if (n > left()) fail("truncated ", what, " (needs ", n, " bytes, ", left(), " left)");
    const char* at = p_;
    p_ += n;
    return at;
  }
  // Every string of a plan is UTF-8 (the frontend's come from Python str);
  // refusing anything else also keeps damaged bytes out of error messages,
  // which Python decodes as UTF-8.
  std::string str(const char* what) {
    uint64_t n = u64();
    const char* p = raw(n, what);
    if (!valid_utf8(p, n)) fail("invalid UTF-8 in ", what);
    return std::string(p, n);
  }
  // A count of items that take at least `min_item` bytes each: a garbled
  // count fails here instead of reserving gigabytes.
  size_t count(size_t min_item, const char* what) {
    uint64_t n = u64();
    if (min_item > 0 && n > left() / min_item)
      fail(what, " count ", n, " exceeds the ", left(), " bytes left");
    return static_cast<size_t>(n);
  }
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) {
    invalid_argument("pjrtx: serialized plan: ", args...);
  }

 private:
  template <typename U>
  U fixed() {
    const char* p = raw(sizeof(U), "number");
    U v = 0;
    for (size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<uint8_t>(p[i])) << (8 * i);
    return v;
  }
  const char* p_;
  const char* end_;
};

// ---- writing ---------------------------------------------------------------

void write_type(Writer& w, const TensorType& t) {
  w.u8(static_cast<uint8_t>(t.dtype));
  w.list(t.shape, [&](int64_t d) { w.i64(d); });
}

void write_ids(Writer& w, const std::vector<ValueId>& ids) {
  w.list(ids, [&](ValueId v) { w.u32(static_cast<uint32_t>(v)); });
}

void write_strings(Writer& w, const std::vector<std::string>& v) {
  w.list(v, [&](const std::string& s) { w.str(s); });
}

// The tag is the variant's index; the static_assert keeps the table below in
// step with AttrValue.
static_assert(std::variant_size_v<AttrValue> == 9, "update write_attr/read_attr");

void write_attr(Writer& w, const AttrValue& v) {
  w.u8(static_cast<uint8_t>(v.index()));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (std::is_same_v<T, bool>) {
          w.u8(x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.i64(x);
        } else if constexpr (std::is_same_v<T, double>) {
          w.f64(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          w.str(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          w.list(x, [&](int64_t e) { w.i64(e); });
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          w.list(x, [&](double e) { w.f64(e); });
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          write_strings(w, x);
        } else {
          static_assert(std::is_same_v<T, std::shared_ptr<const DenseData>>);
          w.u8(x ? 1 : 0);
          if (!x) return;
          write_type(w, x->type);
          w.u8(x->splat ? 1 : 0);
          w.u64(x->bytes.size());
          w.raw(x->bytes.data(), x->bytes.size());
        }
      },
      v);
}

void write_region(Writer& w, const Region& r);

void write_instruction(Writer& w, const Instruction& inst) {
  w.str(opcode_name(inst.op));
  write_ids(w, inst.operands);
  write_ids(w, inst.results);
  w.u64(inst.attrs.size());
  for (const auto& [name, value] : inst.attrs) {
    w.str(name);
    write_attr(w, value);
  }
  w.list(inst.regions, [&](const Region& r) { write_region(w, r); });
  w.str(inst.loc);
}

void write_region(Writer& w, const Region& r) {
  write_ids(w, r.params);
  w.list(r.body, [&](const Instruction& i) { write_instruction(w, i); });
  write_ids(w, r.returns);
}

// ---- reading ---------------------------------------------------------------

TensorType read_type(Reader& r) {
  TensorType t;
  uint8_t d = r.u8();
  if (d == 0 || d > static_cast<uint8_t>(DType::kF4E2M1FN)) r.fail("unknown dtype ", int{d});
  t.dtype = static_cast<DType>(d);
  size_t n = r.count(8, "shape");
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = r.i64();
    if (dim < 0) r.fail("negative dimension ", dim);
    t.shape.push_back(dim);
  }
  return t;
}

std::vector<ValueId> read_ids(Reader& r, size_t num_values, const char* what) {
  size_t n = r.count(4, what);
  std::vector<ValueId> ids(n);
  for (auto& v : ids) {
    uint32_t id = r.u32();
    if (id >= num_values) r.fail(what, " names value %", id, " of ", num_values);
    v = static_cast<ValueId>(id);
  }
  return ids;
}

std::vector<std::string> read_strings(Reader& r, const char* what) {
  size_t n = r.count(8, what);
  std::vector<std::string> v(n);
  for (auto& s : v) s = r.str(what);
  return v;
}

AttrValue read_attr(Reader& r) {
  uint8_t tag = r.u8();
  switch (tag) {
    case 0: return std::monostate{};
    case 1: return r.u8() != 0;
    case 2: return r.i64();
    case 3: return r.f64();
    case 4: return r.str("string attribute");
    case 5: {
      std::vector<int64_t> v(r.count(8, "int list"));
      for (auto& e : v) e = r.i64();
      return v;
    }
    case 6: {
      std::vector<double> v(r.count(8, "float list"));
      for (auto& e : v) e = r.f64();
      return v;
    }
    case 7: return read_strings(r, "string list");
    case 8: {
      if (r.u8() == 0) return std::shared_ptr<const DenseData>();
      auto d = std::make_shared<DenseData>();
      d->type = read_type(r);
      d->splat = r.u8() != 0;
      uint64_t n = r.u64();
      const char* p = r.raw(n, "dense data");
      int64_t want = d->splat ? dtype_size(d->type.dtype) : d->type.byte_size();
      if (want < 0 || static_cast<uint64_t>(want) != n)
        r.fail("dense ", d->type.str(), " needs ", want, " bytes, has ", n);
      const auto* q = reinterpret_cast<const uint8_t*>(p);
      d->bytes.assign(q, q + n);
      return std::shared_ptr<const DenseData>(std::move(d));
    }
    default:
      r.fail("unknown attribute kind ", int{tag});
  }
}

Region read_region(Reader& r, size_t num_values, int depth);

Instruction read_instruction(Reader& r, size_t num_values, int depth) {
  Instruction inst;
  std::string name = r.str("opcode");
  auto op = parse_opcode(name);
  if (!op) r.fail("unknown opcode '", name, "'");
  inst.op = *op;
  inst.operands = read_ids(r, num_values, "operands");
  inst.results = read_ids(r, num_values, "results");
  size_t n_attrs = r.count(9, "attributes");
  for (size_t i = 0; i < n_attrs; ++i) {
    std::string key = r.str("attribute name");
    inst.attrs[key] = read_attr(r);
  }
  size_t n_regions = r.count(24, "regions");
  for (size_t i = 0; i < n_regions; ++i) inst.regions.push_back(read_region(r, num_values, depth + 1));
  inst.loc = r.str("location");
  return inst;
}

Region read_region(Reader& r, size_t num_values, int depth) {
  if (depth > kMaxDepth) r.fail("regions nest deeper than ", kMaxDepth);
  Region reg;
  reg.params = read_ids(r, num_values, "region parameters");
  size_t n = r.count(8, "instructions");
  reg.body.reserve(n);
  for (size_t i = 0; i < n; ++i) reg.body.push_back(read_instruction(r, num_values, depth));
  reg.returns = read_ids(r, num_values, "region results");
  return reg;
}

}  // namespace

std::string serialize_plan(const Plan& plan) {
  Writer w;
  w.raw(kMagic, sizeof(kMagic));
  w.u32(kPlanFormatVersion);
  w.str(plan.name);
  w.list(plan.values, [&](const TensorType& t) { write_type(w, t); });
  w.list(plan.functions, [&](const Function& f) {
    w.str(f.name);
    w.u8(f.is_public ? 1 : 0);
    write_region(w, f.body);
    w.list(f.result_types, [&](const TensorType& t) { write_type(w, t); });
    w.list(f.donors, [&](bool d) { w.u8(d ? 1 : 0); });
    write_strings(w, f.arg_memory_kinds);
    write_strings(w, f.result_memory_kinds);
    write_strings(w, f.arg_shardings);
    write_strings(w, f.result_shardings);
  });
  w.i64(plan.entry);
  return w.take();
}

Plan deserialize_plan(std::string_view bytes) {
  Reader r(bytes);
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    r.fail("not a pjrtx plan (bad magic)");
  r.raw(sizeof(kMagic), "magic");
  uint32_t version = r.u32();
  if (version != kPlanFormatVersion)
    r.fail("format version ", version, ", this pjrtx reads version ", kPlanFormatVersion,
           " (recompile the program)");
  Plan plan;
  plan.name = r.str("plan name");
  size_t n_values = r.count(9, "values");
  plan.values.reserve(n_values);
  for (size_t i = 0; i < n_values; ++i) plan.values.push_back(read_type(r));
  size_t n_funcs = r.count(8, "functions");
  for (size_t i = 0; i < n_funcs; ++i) {
    Function f;
    f.name = r.str("function name");
    f.is_public = r.u8() != 0;
    f.body = read_region(r, n_values, 0);
    size_t n_results = r.count(9, "result types");
    for (size_t j = 0; j < n_results; ++j) f.result_types.push_back(read_type(r));
    size_t n_donors = r.count(1, "donors");
    for (size_t j = 0; j < n_donors; ++j) f.donors.push_back(r.u8() != 0);
    f.arg_memory_kinds = read_strings(r, "argument memory kinds");
    f.result_memory_kinds = read_strings(r, "result memory kinds");
    f.arg_shardings = read_strings(r, "argument shardings");
    f.result_shardings = read_strings(r, "result shardings");
    plan.functions.push_back(std::move(f));
  }
  int64_t entry = r.i64();
  if (entry < 0 || static_cast<uint64_t>(entry) >= plan.functions.size())
    r.fail("entry function ", entry, " of ", plan.functions.size());
  plan.entry = static_cast<int>(entry);
  if (!r.done()) r.fail(r.left(), " trailing bytes");
  return plan;
}

}  // namespace pjrtx::compiler
