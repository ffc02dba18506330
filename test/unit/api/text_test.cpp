// Messages that quote what a user wrote: quoteValue and validUtf8 always give UTF-8 that JSON can
// carry (the status writer's conditions and Events dump them; nlohmann throws on invalid UTF-8).
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/text.h"

namespace {

using tessera::api::quoteValue;
using tessera::api::validUtf8;

bool dumps(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

TEST_CASE("validUtf8 keeps well-formed UTF-8 and replaces every other byte", "[api][text]") {
  CHECK(validUtf8("plain") == "plain");
  CHECK(validUtf8("r\xC3\xA9seau \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x9A\x80") == "r\xC3\xA9seau \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x9A\x80");
  CHECK(validUtf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(validUtf8("\xC3") == "\xEF\xBF\xBD");                                   // cut short
  CHECK(validUtf8("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");                   // overlong
  CHECK(validUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");   // a surrogate
  CHECK(validUtf8("\xF4\x90\x80\x80").find('\xF4') == std::string::npos);        // past U+10FFFF
}

TEST_CASE("quoteValue never cuts a character and never passes a byte that is not UTF-8", "[api][text]") {
  const std::string e = "\xC3\xA9";  // é, two bytes
  // 63 bytes, then é would cross the 64-byte cut: it is left out whole.
  CHECK(quoteValue(std::string(63, 'x') + e) == "\"" + std::string(63, 'x') + "...\"");
  CHECK(quoteValue(std::string(62, 'x') + e) == "\"" + std::string(62, 'x') + e + "\"");
  CHECK(quoteValue("a\xFF") == "\"a\xEF\xBF\xBD\"");
  CHECK(quoteValue("q\"\n") == "\"q\\x22\\x0a\"");
}

TEST_CASE("any bytes: quoteValue and validUtf8 give text JSON can carry", "[api][text]") {
  std::mt19937 rng(16);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 80, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? 0x80 + rng() % 0x80 : rng() % 0x100);
    INFO("case " << i);
    REQUIRE(dumps(validUtf8(s)));
    REQUIRE(dumps(quoteValue(s)));
    REQUIRE(validUtf8(validUtf8(s)) == validUtf8(s));
  }
}
