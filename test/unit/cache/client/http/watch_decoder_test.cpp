#include <catch2/catch.hpp>

#include "tessera/cache/rate_limit.h"
#include "tessera/cache/watch_decoder.h"

using namespace tessera::cache;

namespace {
const std::string kAdded =
    R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a{b}\"c","resourceVersion":"5"}}})";
const std::string kBookmark = R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"9"}}})";
const std::string kGone =
    R"x({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (7)","reason":"Expired","code":410}})x";
}  // namespace

TEST_CASE("watch decoder: an object split across chunks, byte by byte") {
  WatchDecoder d;
  const std::string stream = kAdded + "\n";
  std::vector<WatchEvent> got;
  for (char c : stream) {
    auto r = d.feed(std::string_view(&c, 1));
    REQUIRE(r.ok());
    for (auto& e : *r) got.push_back(std::move(e));
  }
  REQUIRE(got.size() == 1);
  CHECK(got[0].type == WatchEventType::Added);
  CHECK(got[0].object["metadata"]["name"] == "a{b}\"c");  // braces and quotes inside strings
  CHECK(d.pending() == 0);
}

TEST_CASE("watch decoder: several objects in one chunk, then a split one") {
  WatchDecoder d;
  const std::string chunk = kAdded + "\n" + kBookmark + "\n" + kAdded.substr(0, 20);
  auto r = d.feed(chunk);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[1].type == WatchEventType::Bookmark);
  CHECK((*r)[1].object["metadata"]["resourceVersion"] == "9");
  CHECK(d.pending() == 20);
  auto r2 = d.feed(kAdded.substr(20) + "\r\n");
  REQUIRE(r2.ok());
  REQUIRE(r2->size() == 1);
  CHECK((*r2)[0].object["metadata"]["resourceVersion"] == "5");
}

TEST_CASE("watch decoder: objects without newlines between them") {
  WatchDecoder d;
  auto r = d.feed(kAdded + kAdded + kAdded);
  REQUIRE(r.ok());
  CHECK(r->size() == 3);
}

TEST_CASE("watch decoder: ERROR 410 carries the Status") {
  WatchDecoder d;
  auto r = d.feed(kGone + "\n");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  CHECK((*r)[0].type == WatchEventType::Error);
  CHECK((*r)[0].object["code"] == 410);
  CHECK((*r)[0].object["reason"] == "Expired");
}

TEST_CASE("watch decoder: malformed input is an error naming what was wrong") {
  {
    WatchDecoder d;
    auto r = d.feed(R"({"type":"SOMETHING","object":{}})");
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("unknown event type \"SOMETHING\"") != std::string::npos);
  }
  {
    WatchDecoder d;
    auto r = d.feed("garbage");
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("between events") != std::string::npos);
    CHECK(!d.feed("{}").ok());  // unusable after an error
  }
  {
    WatchDecoder d;
    auto r = d.feed(R"({"type":"ADDED"})");
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("without an \"object\"") != std::string::npos);
  }
}

TEST_CASE("watch decoder: long streams keep the buffer small") {
  WatchDecoder d;
  for (int i = 0; i < 1000; ++i) {
    auto r = d.feed(kAdded + "\n" + kAdded.substr(0, 7));
    REQUIRE(r.ok());
    auto r2 = d.feed(kAdded.substr(7) + "\n");
    REQUIRE(r2.ok());
    REQUIRE(r->size() + r2->size() == 2);
  }
  CHECK(d.pending() == 0);
}

TEST_CASE("token bucket: burst, then one token per 1/qps") {
  TokenBucket b(10, 3);  // 10 QPS, burst 3
  const int64_t t0 = 1'000'000'000;
  CHECK(b.reserve(t0) == 0);
  CHECK(b.reserve(t0) == 0);
  CHECK(b.reserve(t0) == 0);
  CHECK(b.reserve(t0) == 100'000'000);  // the 4th waits 100 ms
  CHECK(b.reserve(t0) == 200'000'000);  // the 5th is booked after it
  // One second later the bucket has refilled (the two booked tokens were paid back first).
  CHECK(b.reserve(t0 + 1'000'000'000) == 0);
  TokenBucket unlimited(0, 1);
  for (int i = 0; i < 100; ++i) CHECK(unlimited.reserve(t0) == 0);
}

TEST_CASE("backoff: doubles up to the maximum, with jitter inside [d/2, d]") {
  Backoff b(100, 1000, 42);
  const int64_t expected[] = {100, 200, 400, 800, 1000, 1000};
  for (int64_t d : expected) {
    int64_t v = b.next();
    CHECK(v >= d / 2);
    CHECK(v <= d);
  }
  b.reset();
  CHECK(b.next() <= 100);
}
