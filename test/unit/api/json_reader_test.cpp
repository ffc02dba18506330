// JsonReader (private to tessera_api): field paths, absent vs null, typed reads and their errors.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "../src/api/json_reader.h"

using namespace tessera::api;
using nlohmann::json;

namespace {

const std::string kObject = "Pod team-a/big-0";

json sample() {
  return json::parse(R"({
    "metadata": {"name": "big-0", "labels": {"app": "x", "bad": 3}, "gone": null},
    "spec": {"containers": [{"name": "a", "ports": [{"hostPort": 80}, 7]}], "priority": 2.5,
             "big": 3000000000, "when": "yesterday", "values": ["a", 1]}
  })");
}

}  // namespace

TEST_CASE("json reader: errors name the object and the field path, spelled out on demand") {
  const json j = sample();
  const JsonReader root(j, kObject);
  CHECK(root.path() == "(root)");
  CHECK(root.error("boom").message == "Pod team-a/big-0: (root): boom");
  CHECK(root.error("boom").code == 422);

  auto spec = root.object("spec");
  REQUIRE(spec.ok());
  CHECK(spec->path() == "spec");
  CHECK(spec->member("nodeName").path() == "spec.nodeName");  // absent members still know their path
  CHECK_FALSE(spec->member("nodeName"));

  std::vector<std::string> paths;
  Status st = spec->forEachObject("containers", [&](const JsonReader& ct) -> Status {
    paths.push_back(ct.path());
    return ct.forEachObject("ports", [&](const JsonReader& port) -> Status {
      paths.push_back(port.member("hostPort").path());
      return {};
    });
  });
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "Pod team-a/big-0: spec.containers[0].ports[1]: expected an object, got integer");
  CHECK(paths == std::vector<std::string>{"spec.containers[0]", "spec.containers[0].ports[0].hostPort"});
}

TEST_CASE("json reader: absent and null members leave the output alone") {
  const json j = sample();
  const JsonReader root(j, kObject);
  auto md = root.object("metadata");
  REQUIRE(md.ok());
  CHECK_FALSE(md->member("gone"));
  std::string s = "kept";
  CHECK(md->read("gone", s).ok());
  CHECK(md->read("missing", s).ok());
  CHECK(s == "kept");
  std::optional<int64_t> n;
  CHECK(md->read("gone", n).ok());
  CHECK_FALSE(n.has_value());
  // A member of a non-object is absent too.
  CHECK_FALSE(md->member("name").member("x"));
}

TEST_CASE("json reader: typed reads report the type they wanted and the type they got") {
  const json j = sample();
  const JsonReader root(j, kObject);
  auto md = root.object("metadata");
  auto spec = root.object("spec");
  REQUIRE(md.ok());
  REQUIRE(spec.ok());

  StringMap labels;
  Status st = md->read("labels", labels);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "Pod team-a/big-0: metadata.labels[\"bad\"]: expected a string, got integer");

  int32_t prio = 0;
  st = spec->read("priority", prio);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "Pod team-a/big-0: spec.priority: expected an integer, got 2.5");

  st = spec->read("big", prio);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "Pod team-a/big-0: spec.big: value 3000000000 out of range");
  int64_t big = 0;
  CHECK(spec->read("big", big).ok());
  CHECK(big == 3000000000);

  std::optional<Time> when;
  st = spec->read("when", when);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.rfind("Pod team-a/big-0: spec.when: ", 0) == 0);

  std::vector<std::string> values;
  st = spec->read("values", values);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "Pod team-a/big-0: spec.values[1]: expected a string, got integer");
  CHECK(values == std::vector<std::string>{"a"});

  auto notAList = spec->list("priority");
  REQUIRE_FALSE(notAList.ok());
  CHECK(notAList.error().message == "Pod team-a/big-0: spec.priority: expected a list, got number");
  auto notAnObject = md->object("name");
  REQUIRE_FALSE(notAnObject.ok());
  CHECK(notAnObject.error().message == "Pod team-a/big-0: metadata.name: expected an object, got string");
}

TEST_CASE("json reader: members in key order, null values included") {
  const json j = json::parse(R"({"b": null, "a": "1", "c": 2})");
  const JsonReader root(j, kObject);
  std::vector<std::string> seen;
  Status st = root.forEachMember([&](const JsonReader& m) -> Status {
    seen.push_back(std::string(m.key()) + (m ? "" : "(null)"));
    return {};
  });
  CHECK(st.ok());
  CHECK(seen == std::vector<std::string>{"a", "b(null)", "c"});

  auto q = root.member("a").quantity(true);
  REQUIRE(q.ok());
  CHECK(*q == 1000);
  auto bad = root.member("b").quantity(true);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "Pod team-a/big-0: b: expected a quantity (string or number), got null");
}
