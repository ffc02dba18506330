#include <catch2/catch.hpp>

#include <sstream>

#include "tessera/api/log.h"
#include "tessera/app/leader_election.h"
#include "tessera/cache/memory_cluster.h"

using namespace tessera;

namespace {
app::LeaseOptions opts(const std::string& id) {
  app::LeaseOptions o;
  o.namespace_ = "default";
  o.identity = id;
  return o;  // 15 s lease, 10 s renew deadline
}
}  // namespace

TEST_CASE("leader election: one holder; takeover only after the lease expired; release hands over") {
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster cluster(clock);
  app::LeaderElector a(cluster, clock, opts("a")), b(cluster, clock, opts("b"));

  CHECK(a.tryAcquireOrRenew());  // creates the Lease
  CHECK_FALSE(b.tryAcquireOrRenew());
  CHECK(b.observedHolder() == "a");
  auto lease = cluster.get(api::Kind::Lease, "default", "tessera");
  REQUIRE(lease.ok());
  CHECK((*lease)["spec"]["holderIdentity"] == "a");
  CHECK((*lease)["spec"]["leaseDurationSeconds"] == 15);
  CHECK((*lease)["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z");

  clock.advance(api::Duration{5'000});
  CHECK(a.tryAcquireOrRenew());  // renews
  clock.advance(api::Duration{14'000});
  CHECK_FALSE(b.tryAcquireOrRenew());  // b sees the renewed record now: its 15 s start now

  // a stops renewing: past its renew deadline it no longer leads, even before anyone takes over.
  CHECK_FALSE(a.isLeader());
  CHECK(a.fencingEpoch() == 0);
  clock.advance(api::Duration{14'000});
  CHECK_FALSE(b.tryAcquireOrRenew());  // unchanged for 14 s of b's watching: not expired
  clock.advance(api::Duration{2'000});  // unchanged for 16 s > 15 s lease
  CHECK(b.tryAcquireOrRenew());
  lease = cluster.get(api::Kind::Lease, "default", "tessera");
  CHECK((*lease)["spec"]["holderIdentity"] == "b");
  CHECK((*lease)["spec"]["leaseTransitions"] == 1);
  CHECK_FALSE(a.tryAcquireOrRenew());  // a comes back: b holds a fresh lease

  b.release();
  CHECK(a.tryAcquireOrRenew());  // free at once
}

TEST_CASE("leader election: a renew that races another writer loses on 409") {
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster cluster(clock);
  app::LeaderElector a(cluster, clock, opts("a"));
  REQUIRE(a.tryAcquireOrRenew());
  cluster.failNthCall("update", 1, 409);
  CHECK_FALSE(a.tryAcquireOrRenew());
  CHECK_FALSE(a.isLeader());
}

TEST_CASE("leader election: API errors keep leadership only until the renew deadline") {
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster cluster(clock);
  app::LeaderElector a(cluster, clock, opts("a"));
  REQUIRE(a.tryAcquireOrRenew());
  clock.advance(api::Duration{4'000});
  cluster.failNthCall("get", 1, 500);
  CHECK(a.tryAcquireOrRenew());  // 4 s since the last renew: still leading
  clock.advance(api::Duration{7'000});
  cluster.failNthCall("get", 1, 500);
  CHECK_FALSE(a.tryAcquireOrRenew());  // 11 s > 10 s renew deadline
}

TEST_CASE("leader election: takeover is judged by the Lease's own record, not by comparing clocks") {
  // a's clock is an hour behind b's: by b's clock a's renewTime is always an hour old, yet a renews
  // every 5 s and b must not take over; once a stops, b takes over 15 s after the last change.
  api::FakeClock clockA(api::parseTime("2026-01-01T00:00:00Z").value());
  api::FakeClock clockB(api::parseTime("2026-01-01T01:00:00Z").value());
  cache::MemoryCluster cluster(clockA);
  app::LeaderElector a(cluster, clockA, opts("a")), b(cluster, clockB, opts("b"));
  REQUIRE(a.tryAcquireOrRenew());
  for (int i = 0; i < 6; ++i) {
    CHECK_FALSE(b.tryAcquireOrRenew());
    clockA.advance(api::Duration{5'000});
    clockB.advance(api::Duration{5'000});
    CHECK(a.tryAcquireOrRenew());
  }
  CHECK_FALSE(b.tryAcquireOrRenew());  // saw a's last renew now
  clockB.advance(api::Duration{14'000});
  CHECK_FALSE(b.tryAcquireOrRenew());
  clockB.advance(api::Duration{2'000});
  CHECK(b.tryAcquireOrRenew());
}

TEST_CASE("leader election: each term has its own fencing epoch, 0 past the renew deadline") {
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster cluster(clock);
  app::LeaderElector a(cluster, clock, opts("a"));
  CHECK(a.fencingEpoch() == 0);
  REQUIRE(a.tryAcquireOrRenew());
  const uint64_t first = a.fencingEpoch();
  CHECK(first > 0);
  clock.advance(api::Duration{5'000});
  REQUIRE(a.tryAcquireOrRenew());
  CHECK(a.fencingEpoch() == first);  // renewed in time: the same term
  clock.advance(api::Duration{11'000});
  CHECK(a.fencingEpoch() == 0);  // past the renew deadline: whatever that term queued is fenced off
  REQUIRE(a.tryAcquireOrRenew());  // nobody took over: a leads again, in a new term
  CHECK(a.fencingEpoch() > first);
}

TEST_CASE("leader election: an API error (a Lease the RBAC does not grant) is logged once, not every round") {
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster cluster(clock);
  std::ostringstream out;
  log::setOutput(&out);
  app::LeaderElector a(cluster, clock, opts("a"));
  cluster.failNthCall("get", 1, 403);
  CHECK_FALSE(a.tryAcquireOrRenew());
  cluster.failNthCall("get", 1, 403);
  CHECK_FALSE(a.tryAcquireOrRenew());
  CHECK(a.tryAcquireOrRenew());  // the error is gone: creates the Lease
  log::setOutput(nullptr);
  const std::string text = out.str();
  const auto first = text.find("leader election: reading Lease default/tessera");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("leader election: reading Lease", first + 1) == std::string::npos);  // once
}
