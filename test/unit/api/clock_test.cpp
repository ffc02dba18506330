#include <catch2/catch.hpp>

#include "tessera/api/clock.h"

using namespace tessera::api;

namespace {
int64_t t(const char* s) {
  auto r = parseTime(s);
  INFO(s << (r.ok() ? "" : ": " + r.error().message));
  REQUIRE(r.ok());
  return r->unixMillis;
}
int64_t d(const char* s) {
  auto r = parseDuration(s);
  INFO(s << (r.ok() ? "" : ": " + r.error().message));
  REQUIRE(r.ok());
  return r->millis;
}
}  // namespace

TEST_CASE("clock: parseTime RFC 3339", "[clock]") {
  CHECK(t("1970-01-01T00:00:00Z") == 0);
  CHECK(t("2026-01-01T00:00:00Z") == 1767225600000);
  CHECK(t("2025-12-31T00:00:00Z") == 1767139200000);
  CHECK(t("2000-02-29T12:34:56Z") == 951827696000);
  CHECK(t("2026-01-01T00:00:00.5Z") == 1767225600500);
  CHECK(t("2026-01-01T00:00:00.123456789Z") == 1767225600123);
  CHECK(t("2026-01-01T02:00:00+02:00") == 1767225600000);
  CHECK(t("2025-12-31T19:00:00-05:00") == 1767225600000);
  CHECK(t("2026-01-01t00:00:00z") == 1767225600000);
  CHECK(t("1969-12-31T23:59:59Z") == -1000);
  CHECK(t("1900-01-01T00:00:00Z") == -2208988800000);
  const char* bad[] = {"",  "2026-01-01",  "2026-01-01T00:00:00", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
                       "2026-01-01T24:00:00Z", "2026-01-01T00:60:00Z", "2026-01-01T00:00:60Z",
                       "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00+0200", "2026-01-01 00:00:00Z",
                       "2026-01-01T00:00:00Zjunk", "26-01-01T00:00:00Z", "2026-1-01T00:00:00Z", "yesterday"};
  for (const char* s : bad) {
    INFO(s);
    CHECK_FALSE(parseTime(s).ok());
  }
}

TEST_CASE("clock: formatTime", "[clock]") {
  CHECK(formatTime(Time{0}) == "1970-01-01T00:00:00Z");
  CHECK(formatTime(Time{1767225600000}) == "2026-01-01T00:00:00Z");
  CHECK(formatTime(Time{1767225600999}) == "2026-01-01T00:00:00Z");
  CHECK(formatTime(Time{951827696000}) == "2000-02-29T12:34:56Z");
  CHECK(formatTime(Time{-1}) == "1969-12-31T23:59:59Z");
  for (const char* s : {"2024-02-29T23:59:59Z", "1999-12-31T00:00:01Z", "2100-03-01T00:00:00Z"})
    CHECK(formatTime(parseTime(s).value()) == s);
}

TEST_CASE("clock: parseDuration Go style", "[clock]") {
  CHECK(d("0") == 0);
  CHECK(d("0s") == 0);
  CHECK(d("90s") == 90000);
  CHECK(d("10m") == 600000);
  CHECK(d("1h30m") == 5400000);
  CHECK(d("500ms") == 500);
  CHECK(d("1.5h") == 5400000);
  CHECK(d("1.5s") == 1500);
  CHECK(d(".5s") == 500);
  CHECK(d("2h45m30.5s") == 9930500);
  CHECK(d("1500us") == 1);
  CHECK(d("2000000ns") == 2);
  CHECK(d("+5s") == 5000);
  CHECK(d("24h") == 86400000);
  const char* bad[] = {"", "-1s", "-0", "5", "1x", "s", "1h30", "abc", "1.5", ".s", "1 h", " 1h", "1h ", "1d",
                       "99999999999999999999h", "3000000h"};
  for (const char* s : bad) {
    INFO(s);
    CHECK_FALSE(parseDuration(s).ok());
  }
}

TEST_CASE("clock: formatDuration", "[clock]") {
  CHECK(formatDuration(Duration{0}) == "0s");
  CHECK(formatDuration(Duration{500}) == "500ms");
  CHECK(formatDuration(Duration{1500}) == "1.5s");
  CHECK(formatDuration(Duration{90000}) == "1m30s");
  CHECK(formatDuration(Duration{5400000}) == "1h30m0s");
  CHECK(formatDuration(Duration{3600000}) == "1h0m0s");
  CHECK(formatDuration(Duration{-90000}) == "-1m30s");
  for (int64_t ms : {int64_t{1}, int64_t{999}, int64_t{61001}, int64_t{86400000}})
    CHECK(parseDuration(formatDuration(Duration{ms})).value().millis == ms);
}

TEST_CASE("clock: fake and system clocks", "[clock]") {
  FakeClock c(Time{1000});
  c.advance(Duration{500});
  CHECK(c.now().unixMillis == 1500);
  SystemClock s;
  CHECK(s.now().unixMillis > 1700000000000);  // after 2023
}
