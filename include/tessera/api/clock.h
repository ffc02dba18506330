#pragma once
/// Time values, RFC 3339 / duration parsing, and the injectable Clock.
#include <cstdint>
#include <compare>
#include <string>
#include <string_view>

#include "tessera/api/result.h"

namespace tessera::api {

/// A point in time: milliseconds since the Unix epoch (UTC).
struct Time {
  int64_t unixMillis = 0;
  auto operator<=>(const Time&) const = default;
};

/// A span of time in milliseconds.
struct Duration {
  int64_t millis = 0;
  auto operator<=>(const Duration&) const = default;
};

inline Time operator+(Time t, Duration d) { return Time{t.unixMillis + d.millis}; }
inline Duration operator-(Time a, Time b) { return Duration{a.unixMillis - b.unixMillis}; }

/// Parses RFC 3339 ("2026-01-01T00:00:00Z", fractional seconds and +hh:mm offsets accepted).
Result<Time> parseTime(std::string_view text);
/// Formats as RFC 3339 UTC with second precision ("2026-01-01T00:00:00Z").
std::string formatTime(Time t);
/// Parses Go-style durations: "90s", "10m", "1h30m", "500ms", "0s", "0". Negative values rejected.
Result<Duration> parseDuration(std::string_view text);
/// "1h30m0s"-style formatting.
std::string formatDuration(Duration d);

/// Source of the current time. The daemon uses the system clock; tests and scenarios a fake.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time now() const = 0;
};

/// Wall clock.
class SystemClock final : public Clock {
 public:
  Time now() const override;
};

/// Manually advanced clock (virtual time of scenarios and tests). Not thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Time start) : now_(start) {}
  Time now() const override { return now_; }
  void advance(Duration d) { now_.unixMillis += d.millis; }
  void set(Time t) { now_ = t; }

 private:
  Time now_;
};

}  // namespace tessera::api
