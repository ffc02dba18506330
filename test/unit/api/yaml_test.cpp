#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"

using namespace tessera::api;
using nlohmann::json;

namespace {
json one(const char* text) {
  auto r = yamlToJson(text);
  INFO(text << (r.ok() ? "" : ": " + r.error().message));
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  return r->front();
}
}  // namespace

TEST_CASE("yaml: scalar typing follows the YAML 1.2 core schema", "[yaml]") {
  json j = one(R"(
quoted: "4"
single: '4'
plain: 4
neg: -12
big: 9223372036854775807
float: 1.5
exp: 1e3
yes: true
Yes2: True
no: FALSE
word: yes
nothing: null
tilde: ~
empty:
qnull: "null"
qtrue: "true"
str: 512Gi
hex: 0x1F
oct: 0o17
ver: 1.2.3
time: 2026-01-01T00:00:00Z
)");
  CHECK(j["quoted"] == json("4"));
  CHECK(j["single"] == json("4"));
  CHECK(j["plain"].is_number_integer());
  CHECK(j["plain"] == 4);
  CHECK(j["neg"] == -12);
  CHECK(j["big"] == INT64_MAX);
  CHECK(j["float"].is_number_float());
  CHECK(j["float"] == 1.5);
  CHECK(j["exp"].is_number_float());
  CHECK(j["exp"] == 1000.0);
  CHECK(j["yes"] == true);
  CHECK(j["Yes2"] == true);
  CHECK(j["no"] == false);
  CHECK(j["word"] == json("yes"));  // YAML 1.1 booleans are strings in 1.2
  CHECK(j["nothing"].is_null());
  CHECK(j["tilde"].is_null());
  CHECK(j["empty"].is_null());
  CHECK(j["qnull"] == json("null"));
  CHECK(j["qtrue"] == json("true"));
  CHECK(j["str"] == json("512Gi"));
  CHECK(j["hex"] == 31);
  CHECK(j["oct"] == 15);
  CHECK(j["ver"] == json("1.2.3"));
  CHECK(j["time"] == json("2026-01-01T00:00:00Z"));
}

TEST_CASE("yaml: structures, flow style and multiple documents", "[yaml]") {
  auto r = yamlToJson("a: [1, \"2\", {b: c}]\n---\n- x\n- {y: [z]}\n---\n");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);  // trailing empty document skipped
  CHECK((*r)[0]["a"][0] == 1);
  CHECK((*r)[0]["a"][1] == json("2"));
  CHECK((*r)[0]["a"][2]["b"] == json("c"));
  CHECK((*r)[1][1]["y"][0] == json("z"));
  auto empty = yamlToJson("");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  auto anchors = yamlToJson("base: &b {cpu: \"1\"}\nother: *b\n");
  REQUIRE(anchors.ok());
  CHECK((*anchors)[0]["other"]["cpu"] == json("1"));
}

TEST_CASE("yaml: errors carry a line and column and never throw", "[yaml]") {
  auto r = yamlToJson("a: 1\nb: [1, 2\nc: 3\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("line") != std::string::npos);
  auto tab = yamlToJson("a:\n  b: 1\n c: 2\n");
  REQUIRE_FALSE(tab.ok());
  CHECK(tab.error().message.find("yaml: line 3") != std::string::npos);
  auto dup = yamlToJson("a: 1\na: 2\n");
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().message.find("duplicate key \"a\"") != std::string::npos);
  CHECK_FALSE(yamlToJson("{[1]: x}").ok());
  CHECK_FALSE(yamlToJson("\"unterminated").ok());
}

TEST_CASE("yaml: streams on which yaml-cpp 0.7 stops making progress are errors, not hangs", "[yaml]") {
  // Found by test/fuzz/yaml_fuzz.cpp (jbeder/yaml-cpp#1040): LoadAll looped forever on these.
  for (const char* text : {",", " a: b\n,\n", "  a: b\n ,\n    c: d\n"}) {
    auto r = yamlToJson(text);
    INFO(text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("stops making progress") != std::string::npos);
  }
  // Empty documents between real ones are still skipped, not taken for a stuck parser.
  auto docs = yamlToJson("a: 1\n---\n---\nb: 2\n");
  REQUIRE(docs.ok());
  CHECK(docs->size() == 2);
}

TEST_CASE("yaml: text that is not UTF-8 is an error naming the line", "[yaml]") {
  // Found by test/fuzz/config_fuzz.cpp: the bytes reached nlohmann::json, whose dump() throws.
  auto r = yamlToJson("a: b\nc: \xff\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("yaml: line 2, column 4: not printable UTF-8") != std::string::npos);
  CHECK_FALSE(yamlToJson("a: \xed\xa0\x80\n").ok());  // a surrogate
  CHECK_FALSE(yamlToJson("a: \xc3").ok());            // cut short
  auto ok = yamlToJson("a: h\xc3\xa9llo \xf0\x9d\x84\x9e\n");
  REQUIRE(ok.ok());
  CHECK(ok->front()["a"] == "h\xc3\xa9llo \xf0\x9d\x84\x9e");
}

TEST_CASE("yaml: control characters YAML does not allow are errors", "[yaml]") {
  CHECK_FALSE(yamlToJson(std::string("a: b\0c\n", 7)).ok());  // yaml-cpp 0.7 turned a NUL into stray bytes
  CHECK_FALSE(yamlToJson("a: \x01\n").ok());
  CHECK(yamlToJson("a:\tb\r\nc: d\n").ok());
}
