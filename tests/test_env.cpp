// tensor/env.h: the one rule every LOOM_* knob is read by (unset or empty: the default).
#include <cstdlib>

#include "helpers.h"
#include "tensor/env.h"

using namespace loom;

namespace {

constexpr const char* kVar = "LOOM_TEST_ENV_KNOB";

// Sets (or with nullptr unsets) kVar for one check.
void set(const char* v) {
  if (v)
    ::setenv(kVar, v, 1);
  else
    ::unsetenv(kVar);
}

}  // namespace

TEST_CASE("env: unset or empty means the default") {
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    set(v);
    CHECK(env_str(kVar) == "");
    CHECK(env_str(kVar, "dflt") == "dflt");
    CHECK(env_int(kVar, 42) == 42);
    CHECK(env_int(kVar, -7) == -7);
    CHECK(env_flag(kVar, true));
    CHECK_FALSE(env_flag(kVar, false));
  }
  set(nullptr);
}

TEST_CASE("env: numbers and text") {
  set("123");
  CHECK(env_int(kVar, 5) == 123);
  CHECK(env_str(kVar, "dflt") == "123");
  set("-9");
  CHECK(env_int(kVar, 5) == -9);
  set("8589934592");  // past 32 bits
  CHECK(env_int(kVar, 5) == 8589934592ll);
  set("rows");
  CHECK(env_int(kVar, 5) == 0);  // no leading digits, as std::atoll
  CHECK(env_str(kVar) == "rows");
  set(nullptr);
}

TEST_CASE("env: flags") {
  for (const char* off : {"0", "false", "off"}) {
    set(off);
    CHECK_FALSE(env_flag(kVar, true));
    CHECK_FALSE(env_flag(kVar, false));
  }
  for (const char* on : {"1", "true", "on", "yes", "2"}) {
    set(on);
    CHECK(env_flag(kVar, true));
    CHECK(env_flag(kVar, false));
  }
  set(nullptr);
}
