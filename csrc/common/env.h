// Every PJRTX_* environment variable, in one table. pjrtx/env.py reads this
// table through the extension, and `python -m pjrtx doctor` prints it.
#pragma once

#include <string>
#include <vector>

namespace pjrtx {

struct EnvVar {
  const char* name;
  const char* default_value;
  const char* description;
};

const std::vector<EnvVar>& env_vars();

// The variable's value, or its default. Throws INTERNAL for a name that is
// not in the table (so every read goes through it).
std::string env_string(const char* name);
// "1", "true", "yes", "on" (any case) are true.
bool env_flag(const char* name);

}  // namespace pjrtx
