#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/log.h"
#include "tessera/api/result.h"

namespace tessera {
namespace {

api::Result<int> parsePositive(int n) {
  if (n <= 0) return api::makeError("not positive: " + std::to_string(n));
  return n;
}
api::Status check(int n) {
  TESSERA_TRY(parsePositive(n));
  return api::Status::success();
}
api::Result<int> doubled(int n) {
  TESSERA_ASSIGN_OR_RETURN(const int v, parsePositive(n));
  return 2 * v;
}
// A named (non-const) Status or Result: its error is copied, never moved out of it.
api::Status passOn(api::Status& named) {
  TESSERA_TRY(named);
  return api::Status::success();
}
api::Result<int> passOnResult(api::Result<int>& named) {
  TESSERA_ASSIGN_OR_RETURN(const int v, named);
  return v;
}

}  // namespace

TEST_CASE("log: parts are joined into one line at its severity; the sink can be replaced") {
  std::vector<std::pair<log::Severity, std::string>> lines;
  auto previous = log::setSink([&](log::Severity s, std::string_view m) { lines.emplace_back(s, std::string(m)); });
  log::error("relisting ", std::string("pods"), ": ", 410, " (retrying)");
  log::warning('x', true, 2.5);
  log::info("plain");
  log::setSink(std::move(previous));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == std::pair{log::Severity::kError, std::string("relisting pods: 410 (retrying)")});
  CHECK(lines[1].first == log::Severity::kWarning);
  CHECK(lines[1].second.rfind("xtrue2.5", 0) == 0);
  CHECK(lines[2] == std::pair{log::Severity::kInfo, std::string("plain")});
}

TEST_CASE("log: verbosity gates detail as klog's -v does") {
  log::setVerbosity(0);
  CHECK(log::v(0));
  CHECK_FALSE(log::v(2));
  log::setVerbosity(2);
  CHECK(log::v(2));
  CHECK_FALSE(log::v(3));
  log::setVerbosity(0);
}

TEST_CASE("TESSERA_TRY and TESSERA_ASSIGN_OR_RETURN pass the first error up") {
  CHECK(check(3).ok());
  REQUIRE_FALSE(check(-1).ok());
  CHECK(check(-1).error().message == "not positive: -1");
  REQUIRE(doubled(4).ok());
  CHECK(*doubled(4) == 8);
  REQUIRE_FALSE(doubled(0).ok());
  CHECK(doubled(0).error().message == "not positive: 0");
}

TEST_CASE("TESSERA_TRY moves the error of a temporary and copies that of a named status") {
  const std::string long_ = "not positive, and a message longer than a string's own buffer";
  api::Status named = api::makeError(long_, 422);
  const api::Status passed = passOn(named);
  REQUIRE_FALSE(passed.ok());
  CHECK(passed.error().message == long_);
  CHECK(passed.error().code == 422);
  CHECK(named.error().message == long_);  // still there: copied
  api::Result<int> namedResult = api::makeError(long_);
  const api::Result<int> passedResult = passOnResult(namedResult);
  REQUIRE_FALSE(passedResult.ok());
  CHECK(passedResult.error().message == long_);
  CHECK(namedResult.error().message == long_);
  // A temporary's error is moved: the message arrives whole.
  api::Status moved = std::move(named).error();
  CHECK(moved.error().message == long_);
}

}  // namespace tessera

namespace tessera {

TEST_CASE("log: the default output is timestamped text (klog's header) or JSON lines") {
  std::ostringstream out;
  log::setOutput(&out);
  log::setFormat(log::Format::kText);
  log::info("became leader");
  log::warning("lost \"it\"");
  log::setFormat(log::Format::kJson);
  log::error("a \"quoted\"\nline");
  log::setFormat(log::Format::kText);
  log::setOutput(nullptr);
  std::istringstream in(out.str());
  std::string text1, text2, json;
  std::getline(in, text1);
  std::getline(in, text2);
  std::getline(in, json);
  // I1126 11:25:34.088041 4242] became leader
  CHECK(std::regex_match(text1, std::regex(R"(I\d{4} \d\d:\d\d:\d\d\.\d{6} \d+\] became leader)")));
  CHECK(std::regex_match(text2, std::regex(R"(W\d{4} \d\d:\d\d:\d\d\.\d{6} \d+\] lost "it")")));
  auto j = nlohmann::json::parse(json);
  CHECK(j["level"] == "error");
  CHECK(j["msg"] == "a \"quoted\"\nline");
  CHECK(std::regex_match(j["ts"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")));
  CHECK(j["thread"].is_number());
  CHECK(log::parseFormat("json") == log::Format::kJson);
  CHECK(log::parseFormat("text") == log::Format::kText);
  CHECK_FALSE(log::parseFormat("yaml"));
}

}  // namespace tessera
