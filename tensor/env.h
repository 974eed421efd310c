#pragma once
// The library's environment knobs (LOOM_*), read by one rule: an unset or empty variable means
// its default. These read the environment on every call; a knob that must keep one value for
// the whole process is cached by its caller in a function-local static (read once).
#include <cstdlib>
#include <cstring>
#include <string>

namespace loom {

// The variable's text, or `dflt` where it is unset or empty.
inline std::string env_str(const char* name, const char* dflt = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

// The variable as a whole number (std::atoll: its leading digits, 0 where there are none), or
// `dflt` where it is unset or empty. Range checks stay with the caller, which knows the range.
inline long long env_int(const char* name, long long dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}

// "0", "false" and "off" are false, any other text true; `dflt` where unset or empty.
inline bool env_flag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::strcmp(v, "0") && std::strcmp(v, "false") && std::strcmp(v, "off");
}

}  // namespace loom
