#include <catch2/catch.hpp>

#include <string>
#include <vector>

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

}  // namespace tessera
