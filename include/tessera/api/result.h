#pragma once
/// Result<T>: the channel for expected failures (bad input, API errors). Bugs use TESSERA_ASSERT.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
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
  /// A CamelCase reason a caller may act on, as Kubernetes' Status reason ("OverLimit"): a string
  /// literal, null when none. The message stays what a user reads: callers decide from the reason
  /// and name(), not from the words.
  const char* reason = nullptr;
  /// Where name() lies in `message` (no string of its own: errors are made and moved in hot paths).
  uint32_t nameAt = 0, nameSize = 0;

  /// Whether the reason is `r`.
  bool is(const char* r) const { return reason && std::strcmp(reason, r) == 0; }
  /// The name of the object the reason is about (Kubernetes' Status details.name): for a queue's
  /// "OverLimit", that queue; empty when none.
  std::string_view name() const { return std::string_view(message).substr(nameAt, nameSize); }
};

inline Error makeError(std::string message, int code = 0) { return Error{std::move(message), code, nullptr, 0, 0}; }
/// An error with a reason callers act on: `reason` a string literal, `message` the words, of which
/// message[nameAt, nameAt + nameSize) is the name of the object it is about (Error::name()).
inline Error makeReasonError(const char* reason, std::string message, size_t nameAt, size_t nameSize) {
  Error e{std::move(message), 0, reason, 0, 0};
  e.nameAt = static_cast<uint32_t>(std::min(nameAt, e.message.size()));
  e.nameSize = static_cast<uint32_t>(std::min(nameSize, e.message.size() - e.nameAt));
  return e;
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

/// Result without a value. A success holds no Error at all (checks that pass are the common case
/// on the scheduling cycle's paths: nothing to build, move or destroy).
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  static Status success() { return Status(); }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const& {
    TESSERA_ASSERT(!ok());
    return *error_;
  }
  Error&& error() && {
    TESSERA_ASSERT(!ok());
    return std::move(*error_);
  }

 private:
  std::optional<Error> error_;
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
