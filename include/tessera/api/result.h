#pragma once
/// Result<T>: the channel for expected failures (bad input, API errors). Bugs use TESSERA_ASSERT.
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#define TESSERA_ASSERT(cond)                                                                    \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "tessera: assertion failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

namespace tessera::api {

/// An expected failure with a human-readable message that names the object and the field.
struct Error {
  std::string message;
  /// HTTP-like code for client errors (404 not found, 409 conflict, 410 gone, 422 invalid); 0 = none.
  int code = 0;
  /// A CamelCase reason a caller may act on, as Kubernetes' Status reason ("OverLimit"); empty
  /// when none. The message stays what a user reads: callers decide from the reason, not its words.
  std::string reason;
  /// The name of the object the reason is about (Kubernetes' Status details.name): for a queue's
  /// "OverLimit", that queue.
  std::string name;
};

inline Error makeError(std::string message, int code = 0) { return Error{std::move(message), code, {}, {}}; }
/// An error with a reason callers act on (Error::reason, Error::name), its message in words.
inline Error makeReasonError(std::string reason, std::string name, std::string message) {
  return Error{std::move(message), 0, std::move(reason), std::move(name)};
}

/// Holds either a T or an Error. Never throws; value() on an error is a bug (asserts).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { TESSERA_ASSERT(ok()); return std::get<0>(v_); }
  const T& value() const& { TESSERA_ASSERT(ok()); return std::get<0>(v_); }
  T&& value() && { TESSERA_ASSERT(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const& { TESSERA_ASSERT(!ok()); return std::get<1>(v_); }
  Error&& error() && { TESSERA_ASSERT(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

/// Result without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status success() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& { TESSERA_ASSERT(!ok_); return error_; }
  Error&& error() && { TESSERA_ASSERT(!ok_); return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace tessera::api

/// `TESSERA_TRY(expr);` returns expr's error from the enclosing function when expr (a Result or a
/// Status) failed; the enclosing function returns a Result or a Status. The error of a temporary
/// is moved out (its message is not copied); that of a named one is copied.
#define TESSERA_TRY(expr)                                                                       \
  do {                                                                                          \
    auto&& tessera_try_result_ = (expr);                                                        \
    if (!tessera_try_result_.ok())                                                              \
      return std::forward<decltype(tessera_try_result_)>(tessera_try_result_).error();          \
  } while (0)

#define TESSERA_CONCAT_INNER_(a, b) a##b
#define TESSERA_CONCAT_(a, b) TESSERA_CONCAT_INNER_(a, b)
/// `TESSERA_ASSIGN_OR_RETURN(auto port, parsePort(text));` declares (or assigns) lhs from a
/// Result's value, or returns its error from the enclosing function.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr)                                              \
  auto&& TESSERA_CONCAT_(tessera_try_value_, __LINE__) = (expr);                        \
  if (!TESSERA_CONCAT_(tessera_try_value_, __LINE__).ok())                              \
    return std::forward<decltype(TESSERA_CONCAT_(tessera_try_value_, __LINE__))>(      \
               TESSERA_CONCAT_(tessera_try_value_, __LINE__))                           \
        .error();                                                                       \
  lhs = std::move(TESSERA_CONCAT_(tessera_try_value_, __LINE__)).value()
