#pragma once
// loom::Error: the one exception type loom raises. `kind` lets bindings map it to
// the matching Python exception (ValueError, TypeError, IndexError, RuntimeError).
#include <sstream>
#include <stdexcept>
#include <string>

namespace loom {

enum class ErrorKind { Value, Type, Index, Runtime, Memory };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  explicit Error(const std::string& msg) : Error(ErrorKind::Runtime, msg) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// LOOM_CHECK(cond, kind, parts...): throw loom::Error(kind, "parts...") when cond is false.
#define LOOM_CHECK(cond, kind, ...) \
  do {                              \
    if (!(cond)) throw ::loom::Error(::loom::ErrorKind::kind, ::loom::detail::cat(__VA_ARGS__)); \
  } while (0)

}  // namespace loom
