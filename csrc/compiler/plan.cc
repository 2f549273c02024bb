#include "compiler/plan.h"

#include <sstream>

#include "compiler/error.h"

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
          os << "dense<" << x->type.str() << (x->splat ? ", splat" : "") << ">";
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

}  // namespace pjrtx::compiler
