// RFC 3339 and Go-style durations without libc time functions: timegm/gmtime are not portable and
// mktime/localtime depend on TZ, so the calendar arithmetic is done here (Howard Hinnant's
// days_from_civil / civil_from_days algorithms).
#include "tessera/api/clock.h"

#include <chrono>
#include <limits>
#include <string>

namespace tessera::api {
namespace {

constexpr int64_t kMillisPerDay = 86'400'000;

int64_t daysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civilFromDays(int64_t z, int64_t& y, int64_t& m, int64_t& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = yoe + era * 400 + (m <= 2);
}

bool isLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int daysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && isLeap(y) ? 29 : kDays[m - 1];
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// Reads exactly `n` digits at `pos`.
bool fixedDigits(std::string_view s, size_t& pos, size_t n, int64_t& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!isDigit(s[pos + i])) return false;
    out = out * 10 + (s[pos + i] - '0');
  }
  pos += n;
  return true;
}

bool expect(std::string_view s, size_t& pos, char a, char b = 0) {
  if (pos < s.size() && (s[pos] == a || (b != 0 && s[pos] == b))) {
    ++pos;
    return true;
  }
  return false;
}

std::string pad2(int64_t v) {
  std::string s(v < 10 ? "0" : "");  // appended, not "0" + string: GCC 12's -Wrestrict misreads that
  s += std::to_string(v);
  return s;
}

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

Result<Time> parseTime(std::string_view text) {
  auto bad = [&](const char* why) {
    return makeError("invalid time \"" + std::string(text) + "\" (" + why + "; want RFC 3339 like 2026-01-01T00:00:00Z)");
  };
  size_t p = 0;
  int64_t year, month, day, hour, minute, second;
  if (!fixedDigits(text, p, 4, year) || !expect(text, p, '-') || !fixedDigits(text, p, 2, month) ||
      !expect(text, p, '-') || !fixedDigits(text, p, 2, day) || !expect(text, p, 'T', 't') ||
      !fixedDigits(text, p, 2, hour) || !expect(text, p, ':') || !fixedDigits(text, p, 2, minute) ||
      !expect(text, p, ':') || !fixedDigits(text, p, 2, second))
    return bad("malformed");
  if (month < 1 || month > 12) return bad("month out of range");
  if (day < 1 || day > daysInMonth(year, month)) return bad("day out of range");
  if (hour > 23) return bad("hour out of range");
  if (minute > 59) return bad("minute out of range");
  if (second > 59) return bad("second out of range");
  int64_t millis = 0;
  if (expect(text, p, '.')) {
    size_t digits = 0;
    while (p < text.size() && isDigit(text[p])) {
      // Sub-millisecond digits are truncated (metav1.Time keeps seconds; MicroTime microseconds).
      if (digits < 3) millis = millis * 10 + (text[p] - '0');
      ++digits;
      ++p;
    }
    if (digits == 0) return bad("empty fraction");
    for (size_t i = digits; i < 3; ++i) millis *= 10;
  }
  int64_t offsetMinutes = 0;
  if (expect(text, p, 'Z', 'z')) {
    // UTC
  } else if (p < text.size() && (text[p] == '+' || text[p] == '-')) {
    const bool neg = text[p] == '-';
    ++p;
    int64_t oh, om;
    if (!fixedDigits(text, p, 2, oh) || !expect(text, p, ':') || !fixedDigits(text, p, 2, om))
      return bad("malformed offset");
    if (oh > 23 || om > 59) return bad("offset out of range");
    offsetMinutes = (neg ? -1 : 1) * (oh * 60 + om);
  } else {
    return bad("missing time zone");
  }
  if (p != text.size()) return bad("trailing characters");
  const int64_t days = daysFromCivil(year, month, day);
  const int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60;
  return Time{secs * 1000 + millis};
}

std::string formatTime(Time t) {
  const int64_t days = floorDiv(t.unixMillis, kMillisPerDay);
  const int64_t msOfDay = t.unixMillis - days * kMillisPerDay;
  const int64_t secOfDay = msOfDay / 1000;
  int64_t y, m, d;
  civilFromDays(days, y, m, d);
  std::string year = std::to_string(y);
  if (y >= 0 && y < 1000) year.insert(0, 4 - year.size(), '0');
  return year + "-" + pad2(m) + "-" + pad2(d) + "T" + pad2(secOfDay / 3600) + ":" + pad2(secOfDay / 60 % 60) +
         ":" + pad2(secOfDay % 60) + "Z";
}

Result<Duration> parseDuration(std::string_view text) {
  // Go's time.ParseDuration grammar: [+]? ( number unit )+ , or "0". Computed in nanoseconds as Go
  // does (exactly, with integers), then truncated to milliseconds like Duration.Milliseconds().
  auto bad = [&](const std::string& why) {
    return makeError("invalid duration \"" + std::string(text) + "\" (" + why + "; want e.g. 90s, 10m, 1h30m)");
  };
  if (text.empty()) return bad("empty");
  size_t p = 0;
  if (text[0] == '-') return bad("negative");
  if (text[0] == '+') ++p;
  if (text.substr(p) == "0") return Duration{0};
  if (p == text.size()) return bad("empty");
  constexpr __int128 kMaxNanos = std::numeric_limits<int64_t>::max();
  __int128 total = 0;
  while (p < text.size()) {
    __int128 whole = 0, frac = 0, fracScale = 1;
    size_t digits = 0;
    while (p < text.size() && isDigit(text[p])) {
      whole = whole * 10 + (text[p++] - '0');
      ++digits;
      if (whole > kMaxNanos) return bad("overflow");
    }
    if (p < text.size() && text[p] == '.') {
      ++p;
      while (p < text.size() && isDigit(text[p])) {
        if (fracScale < __int128{1'000'000'000'000'000'000}) {  // more digits cannot matter in ns
          frac = frac * 10 + (text[p] - '0');
          fracScale *= 10;
        }
        ++p;
        ++digits;
      }
    }
    if (digits == 0) return bad("missing number");
    size_t u = p;
    while (p < text.size() && !isDigit(text[p]) && text[p] != '.') ++p;
    const std::string_view unit = text.substr(u, p - u);
    int64_t unitNanos;
    if (unit == "ns") unitNanos = 1;
    else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") unitNanos = 1'000;
    else if (unit == "ms") unitNanos = 1'000'000;
    else if (unit == "s") unitNanos = 1'000'000'000;
    else if (unit == "m") unitNanos = 60'000'000'000;
    else if (unit == "h") unitNanos = 3'600'000'000'000;
    else if (unit.empty()) return bad("missing unit");
    else return bad("unknown unit \"" + std::string(unit) + "\"");
    total += whole * unitNanos + frac * unitNanos / fracScale;
    if (total > kMaxNanos) return bad("overflow");
  }
  return Duration{static_cast<int64_t>(total / 1'000'000)};
}

std::string formatDuration(Duration d) {
  if (d.millis == 0) return "0s";
  std::string sign;
  uint64_t ms = static_cast<uint64_t>(d.millis);
  if (d.millis < 0) {
    sign = "-";
    ms = 0 - ms;
  }
  if (ms < 1000) return sign + std::to_string(ms) + "ms";
  std::string out = sign;
  const uint64_t hours = ms / 3'600'000;
  const uint64_t minutes = ms / 60'000 % 60;
  const uint64_t secs = ms / 1000 % 60;
  const uint64_t frac = ms % 1000;
  if (hours > 0) out += std::to_string(hours) + "h";
  if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
  out += std::to_string(secs);
  if (frac != 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "s";
}

Time SystemClock::now() const {
  using namespace std::chrono;
  return Time{duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count()};
}

}  // namespace tessera::api
