// The cache's Inbox: drain() hands over every item once, in arrival order, and the two buffers
// take turns with their storage (a drained batch's goes back to the inbox) unless a burst grew it
// past kKeepItems.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "../src/cache/inbox.h"

using tessera::cache::Inbox;
using tessera::cache::InboxItem;
using tessera::cache::PodReport;

namespace {

InboxItem report(const std::string& podKey) {
  InboxItem item;
  item.op = InboxItem::Op::Report;
  item.report.op = PodReport::Op::BindingDone;
  item.report.podKey = podKey;
  return item;
}

std::vector<std::string> keys(const std::vector<InboxItem>& batch) {
  std::vector<std::string> out;
  for (const auto& item : batch) out.push_back(item.report.podKey);
  return out;
}

}  // namespace

TEST_CASE("inbox: each item is drained once, in arrival order, into a batch reused from drain to drain") {
  Inbox inbox;
  std::vector<InboxItem> batch;
  inbox.drain(batch);
  CHECK(batch.empty());
  for (int i = 0; i < 100; ++i) inbox.push(report("ns/a" + std::to_string(i)));
  inbox.drain(batch);
  REQUIRE(batch.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(batch[i].report.podKey == "ns/a" + std::to_string(i));
  const size_t grown = batch.capacity();

  // The next drain drops the last batch's items (given back with their storage, not queued again).
  inbox.push(report("ns/b"));
  inbox.drain(batch);
  CHECK(keys(batch) == std::vector<std::string>{"ns/b"});
  inbox.push(report("ns/c"));
  inbox.push(report("ns/d"));
  inbox.drain(batch);
  CHECK(keys(batch) == std::vector<std::string>{"ns/c", "ns/d"});
  // They came in the storage of the batch of 100, which the drain of "ns/b" gave back to the inbox.
  CHECK(batch.capacity() >= grown);

  // A burst's storage is released once drained past, not kept.
  for (size_t i = 0; i <= Inbox::kKeepItems; ++i) inbox.push(report("ns/burst"));
  inbox.drain(batch);
  CHECK(batch.size() == Inbox::kKeepItems + 1);
  Inbox::recycle(batch);  // as the cache does once it applied them: a burst's storage goes at once
  CHECK(batch.empty());
  CHECK(batch.capacity() <= Inbox::kKeepItems);
  for (size_t i = 0; i <= Inbox::kKeepItems; ++i) inbox.push(report("ns/burst"));
  inbox.drain(batch);
  inbox.drain(batch);  // the burst's buffer would go back to the inbox here
  inbox.drain(batch);  // and come out here
  CHECK(batch.capacity() <= Inbox::kKeepItems);
}

TEST_CASE("inbox: items pushed from several threads while draining are each drained once") {
  Inbox inbox;
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) inbox.push(report(std::to_string(t) + "/" + std::to_string(i)));
    });
  std::vector<int> next(kThreads, 0);  // each thread's items come in its order
  std::vector<InboxItem> batch;
  int seen = 0;
  auto take = [&] {
    inbox.drain(batch);
    for (const auto& item : batch) {
      const std::string& key = item.report.podKey;
      const int t = std::stoi(key.substr(0, key.find('/'))), i = std::stoi(key.substr(key.find('/') + 1));
      CHECK(i == next[t]++);
      ++seen;
    }
  };
  while (seen < kThreads * kEach / 2) take();
  for (auto& t : threads) t.join();
  take();
  CHECK(seen == kThreads * kEach);
}
