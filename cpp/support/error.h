// Errors of the C++ core. Every failure becomes an fj::Error, which the bindings turn into
// a Python exception; nothing in the core aborts the process.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace fj {

enum class ErrorCode {
  kInvalidArgument,  // bad input from the user or the front end (shapes, dtypes, IR text)
  kUnimplemented,    // a valid request this build cannot do yet
  kInternal,         // a broken invariant: a bug in fusionjit
  kResourceExhausted,  // out of memory (MemoryError in Python)
  kUnavailable,        // a device or its driver is missing or failed (DeviceError)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
inline void AppendAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void AppendAll(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  AppendAll(os, rest...);
}
}  // namespace detail

// StrCat("a", 1, "b") == "a1b": anything with an operator<<.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  detail::AppendAll(os, args...);
  return os.str();
}

template <typename... Args>
[[noreturn]] void ThrowInvalidArgument(const Args&... args) {
  throw Error(ErrorCode::kInvalidArgument, StrCat(args...));
}
template <typename... Args>
[[noreturn]] void ThrowUnimplemented(const Args&... args) {
  throw Error(ErrorCode::kUnimplemented, StrCat(args...));
}
template <typename... Args>
[[noreturn]] void ThrowResourceExhausted(const Args&... args) {
  throw Error(ErrorCode::kResourceExhausted, StrCat(args...));
}
template <typename... Args>
[[noreturn]] void ThrowUnavailable(const Args&... args) {
  throw Error(ErrorCode::kUnavailable, StrCat(args...));
}
template <typename... Args>
[[noreturn]] void ThrowInternal(const Args&... args) {
  throw Error(ErrorCode::kInternal, StrCat(args...));
}

}  // namespace fj

// FJ_CHECK(cond) << nothing: an internal invariant. Throws fj::Error(kInternal) naming the
// file and line; used for bugs in fusionjit, never for user errors.
#define FJ_CHECK(cond, ...)                                                           \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      ::fj::ThrowInternal("internal check failed at ", __FILE__, ":", __LINE__, ": ", \
                          #cond, " " __VA_OPT__(, ) __VA_ARGS__);                     \
    }                                                                                 \
  } while (0)
