// DaemonMetrics' recorders: the API request histogram keeps one series per verb and code, each
// request counted once in its own series, whichever thread records it.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "app/daemon_metrics.h"

using tessera::app::DaemonMetrics;

namespace {

/// The value of `series` (a name with its labels, as served) in the text exposition, or -1.
double sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string apiSeries(const char* suffix, const char* verb, int code) {
  return std::string("tessera_api_request_duration_seconds_") + suffix + "{code=\"" + std::to_string(code) +
         "\",verb=\"" + verb + "\"}";
}

}  // namespace

TEST_CASE("metrics: API requests are counted in their own verb and code's series, from any thread") {
  DaemonMetrics metrics;
  // Verbs and codes that share one half of their labels with another series: a series found by
  // its verb alone, or by its code alone, would count in the wrong one.
  struct Request {
    const char* verb;
    int code;
    int perThread;
    double seconds;
  };
  const std::vector<Request> requests = {
      {"POST", 201, 50, 0.001}, {"POST", 409, 7, 0.002}, {"GET", 200, 30, 0.004}, {"GET", 404, 3, 0.008},
      {"PATCH", 200, 11, 0.016}, {"DELETE", 0, 2, 0.5},
  };
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round)
        for (const auto& r : requests)
          if (round < r.perThread) metrics.apiRequest(r.verb, r.code, r.seconds);
    });
  for (auto& t : threads) t.join();
  const std::string text = "\n" + metrics.text();
  INFO(text);
  for (const auto& r : requests) {
    INFO(r.verb << " " << r.code);
    CHECK(sample(text, apiSeries("count", r.verb, r.code)) == kThreads * r.perThread);
    CHECK(sample(text, apiSeries("sum", r.verb, r.code)) == Approx(kThreads * r.perThread * r.seconds));
  }
  // No other series of the family.
  const std::regex any(R"(\ntessera_api_request_duration_seconds_count\{)");
  CHECK(std::distance(std::sregex_iterator(text.begin(), text.end(), any), std::sregex_iterator()) ==
        static_cast<long>(requests.size()));
}
