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
