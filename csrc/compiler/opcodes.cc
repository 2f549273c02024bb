#include "compiler/opcodes.h"

#include <string>
#include <unordered_map>

namespace pjrtx::compiler {

namespace {
constexpr std::string_view kNames[] = {
#define PJRTX_OPCODE_NAME(id, name) name,
    PJRTX_OPCODES(PJRTX_OPCODE_NAME)
#undef PJRTX_OPCODE_NAME
};
}  // namespace

std::string_view opcode_name(Opcode op) {
  return kNames[static_cast<size_t>(op)];
}

std::optional<Opcode> parse_opcode(std::string_view name) {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, Opcode>();
    for (size_t i = 0; i < static_cast<size_t>(Opcode::kCount); ++i)
      t->emplace(kNames[i], static_cast<Opcode>(i));
    return t;
  }();
  auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  return it->second;
}

}  // namespace pjrtx::compiler
