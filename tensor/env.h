#pragma once
// The rule every environment variable loom reads is parsed by: an unset or empty variable means
// its default. The LOOM_* ones are rows of tensor/knobs.h and are read through it; these
// functions read the environment on every call (tensor/knobs.cpp, and other variables such as
// $HOME).
#include <cstdlib>
#include <cstring>
#include <string>

namespace loom {

// A flag's text: "0", "false" and "off" are false, any other text true.
inline bool parse_flag(const char* v) {
  return std::strcmp(v, "0") && std::strcmp(v, "false") && std::strcmp(v, "off");
}

// A number's text as std::atoll reads it: its leading digits, 0 where there are none. Range
// checks stay with the caller, which knows the range.
inline long long parse_int(const char* v) { return std::atoll(v); }

// The variable's text, or null where it is unset or empty.
inline const char* env_text(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The variable's text, or `dflt` where it is unset or empty.
inline std::string env_str(const char* name, const char* dflt = "") {
  const char* v = env_text(name);
  return v ? v : dflt;
}

// The variable as a whole number (parse_int), or `dflt` where it is unset or empty.
inline long long env_int(const char* name, long long dflt) {
  const char* v = env_text(name);
  return v ? parse_int(v) : dflt;
}

// The variable as a flag (parse_flag), or `dflt` where it is unset or empty.
inline bool env_flag(const char* name, bool dflt) {
  const char* v = env_text(name);
  return v ? parse_flag(v) : dflt;
}

}  // namespace loom
