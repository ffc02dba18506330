#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "tessera/api/quantity.h"

using namespace tessera::api;

namespace {
int64_t milli(const char* s) {
  auto r = parseQuantityMilli(s);
  INFO("quantity " << s << (r.ok() ? "" : ": " + r.error().message));
  REQUIRE(r.ok());
  return *r;
}
int64_t value(const char* s) {
  auto r = parseQuantityValue(s);
  INFO("quantity " << s << (r.ok() ? "" : ": " + r.error().message));
  REQUIRE(r.ok());
  return *r;
}
}  // namespace

TEST_CASE("quantity: plain numbers and decimals", "[quantity]") {
  CHECK(milli("1") == 1000);
  CHECK(value("1") == 1);
  CHECK(milli("0") == 0);
  CHECK(value("0") == 0);
  CHECK(milli("1.5") == 1500);
  CHECK(value("1.5") == 2);  // rounds up
  CHECK(value("0.1") == 1);
  CHECK(milli("0.1") == 100);
  CHECK(milli(".5") == 500);
  CHECK(milli("5.") == 5000);
  CHECK(milli("+2") == 2000);
  CHECK(milli("007") == 7000);
  CHECK(milli("0.0001") == 1);   // 0.1m rounds up to 1m
  CHECK(milli("1.0001") == 1001);
  CHECK(value("1.000000000000000000000000000000000000000001") == 2);  // beyond any fixed width
  CHECK(milli("123456789.123") == 123456789123);
}

TEST_CASE("quantity: decimal SI suffixes", "[quantity]") {
  CHECK(milli("1n") == 1);  // 1e-9 × 1000 rounds up
  CHECK(value("1n") == 1);
  CHECK(milli("1000000n") == 1);
  CHECK(milli("1u") == 1);
  CHECK(milli("1000u") == 1);
  CHECK(milli("1500u") == 2);
  CHECK(milli("100m") == 100);
  CHECK(value("100m") == 1);
  CHECK(milli("1000m") == 1000);
  CHECK(value("1000m") == 1);
  CHECK(value("2k") == 2000);
  CHECK(value("1.5k") == 1500);
  CHECK(value("500M") == 500'000'000);
  CHECK(value("3G") == 3'000'000'000);
  CHECK(value("2T") == 2'000'000'000'000);
  CHECK(value("1P") == 1'000'000'000'000'000);
  CHECK(value("1E") == 1'000'000'000'000'000'000);
  CHECK(value("9E") == 9'000'000'000'000'000'000);
}

TEST_CASE("quantity: binary SI suffixes", "[quantity]") {
  CHECK(value("1Ki") == 1024);
  CHECK(value("1Mi") == 1024 * 1024);
  CHECK(value("2Gi") == 2147483648);
  CHECK(value("1Ti") == int64_t{1} << 40);
  CHECK(value("1Pi") == int64_t{1} << 50);
  CHECK(value("1Ei") == int64_t{1} << 60);
  CHECK(value("7Ei") == int64_t{7} << 60);
  CHECK(value("1.5Gi") == 1610612736);
  CHECK(value("0.5Ki") == 512);
  CHECK(value("0.0001Ki") == 1);  // 0.1024 rounds up
  CHECK(milli("1Ki") == 1024000);
}

TEST_CASE("quantity: decimal exponents", "[quantity]") {
  CHECK(value("1e3") == 1000);
  CHECK(value("1E3") == 1000);
  CHECK(value("1e+3") == 1000);
  CHECK(milli("1E-3") == 1);
  CHECK(value("1E-3") == 1);
  CHECK(milli("1e-4") == 1);  // rounds up
  CHECK(value("1.5e2") == 150);
  CHECK(value("12e0") == 12);
  CHECK(value("1e18") == 1'000'000'000'000'000'000);
}

TEST_CASE("quantity: negative values parse", "[quantity]") {
  CHECK(milli("-1") == -1000);
  CHECK(value("-1") == -1);
  CHECK(milli("-100m") == -100);
  CHECK(value("-2Gi") == -2147483648);
  CHECK(milli("-0") == 0);
}

TEST_CASE("quantity: garbage is rejected", "[quantity]") {
  const char* bad[] = {"",     " ",    "1 ",   " 1",   ".",     "1.2.3", "1Kb",  "abc",  "1 Gi",
                       "--1",  "+-1",  "1ee3", "0x10", "inf",   "NaN",   "1e",   "1e+",  "1e3.5",
                       "1K",   "1kb",  "1mi",  "1gi",  "Gi",    "-",     "+",    "1Gii", "1.5.Gi",
                       "1e3m", "1m3",  "1,5",  "1_000", "1\n",  "e3",    "1i",   "1b",   "١"};
  for (const char* s : bad) {
    INFO("input \"" << s << "\"");
    auto m = parseQuantityMilli(s);
    CHECK_FALSE(m.ok());
    CHECK_FALSE(parseQuantityValue(s).ok());
    if (!m.ok()) CHECK(m.error().message.find("invalid quantity") != std::string::npos);
  }
}

TEST_CASE("quantity: int64 overflow is an error", "[quantity]") {
  CHECK_FALSE(parseQuantityValue("10E").ok());
  CHECK_FALSE(parseQuantityValue("8Ei").ok());
  CHECK_FALSE(parseQuantityMilli("9223372036854775808m").ok());
  CHECK(milli("9223372036854775807m") == std::numeric_limits<int64_t>::max());
  CHECK(value("9223372036854775807") == std::numeric_limits<int64_t>::max());
  CHECK_FALSE(parseQuantityValue("9223372036854775808").ok());
  CHECK_FALSE(parseQuantityMilli("9000P").ok());  // fits as a value, not ×1000
  CHECK(value("9000P") == 9'000'000'000'000'000'000);
  CHECK_FALSE(parseQuantityValue("1e19").ok());
  CHECK_FALSE(parseQuantityValue("1e999999999999").ok());
  CHECK(value("1e-999999999999") == 1);
  CHECK_FALSE(parseQuantityValue(std::string(2000, '1')).ok());  // absurd length
  auto e = parseQuantityValue("100E");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("too large") != std::string::npos);
}

TEST_CASE("quantity: resource amounts by name", "[quantity]") {
  CHECK(isMilliResource("cpu"));
  CHECK(isMilliResource("nvidia.com/gpu"));
  CHECK_FALSE(isMilliResource("memory"));
  CHECK_FALSE(isMilliResource("example.com/fpga"));
  CHECK(parseResourceAmount("cpu", "500m").value() == 500);
  CHECK(parseResourceAmount("nvidia.com/gpu", "2").value() == 2000);
  CHECK(parseResourceAmount("memory", "1Gi").value() == 1073741824);
  CHECK(parseResourceAmount("example.com/fpga", "3").value() == 3);
}

TEST_CASE("quantity: formatting round-trips", "[quantity]") {
  CHECK(formatResourceAmount("cpu", 500) == "500m");
  CHECK(formatResourceAmount("cpu", 4000) == "4");
  CHECK(formatResourceAmount("cpu", 1500) == "1500m");
  CHECK(formatResourceAmount("cpu", 0) == "0");
  CHECK(formatResourceAmount("nvidia.com/gpu", 500) == "0.5");
  CHECK(formatResourceAmount("nvidia.com/gpu", 1250) == "1.25");
  CHECK(formatResourceAmount("nvidia.com/gpu", 1) == "0.001");
  CHECK(formatResourceAmount("nvidia.com/gpu", 4000) == "4");
  CHECK(formatResourceAmount("memory", 32LL << 30) == "32Gi");
  CHECK(formatResourceAmount("memory", 64LL << 20) == "64Mi");
  CHECK(formatResourceAmount("memory", 1536LL << 20) == "1536Mi");
  CHECK(formatResourceAmount("memory", 1000) == "1000");
  CHECK(formatResourceAmount("memory", -(2LL << 30)) == "-2Gi");
  CHECK(formatResourceAmount("example.com/fpga", 2) == "2");
  CHECK(formatResourceAmount("cpu", std::numeric_limits<int64_t>::min()) == "-9223372036854775808m");
  for (int64_t v : {int64_t{1}, int64_t{999}, int64_t{1001}, int64_t{123456789}}) {
    for (const char* name : {"cpu", "nvidia.com/gpu"}) {
      CHECK(parseResourceAmount(name, formatResourceAmount(name, v)).value() == v);
    }
  }
  for (int64_t v : {int64_t{1}, int64_t{1024}, int64_t{3} << 30, int64_t{5} << 60, int64_t{123457}}) {
    CHECK(parseResourceAmount("memory", formatResourceAmount("memory", v)).value() == v);
  }
}
