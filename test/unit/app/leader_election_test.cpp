#include <catch2/catch.hpp>

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
  CHECK_FALSE(b.tryAcquireOrRenew());  // renewed 14 s ago: not expired

  // a stops renewing: past its renew deadline it no longer leads, even before anyone takes over.
  CHECK_FALSE(a.isLeader());
  clock.advance(api::Duration{2'000});  // 16 s since a's renew > 15 s lease
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
