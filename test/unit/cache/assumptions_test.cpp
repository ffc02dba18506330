// The assumption tables against a model that scans every assumed bind: random sequences of binder
// reports and watch confirmations, with the clock moving, must expire the same binds at the same
// snapshots (expireBinds keeps its binds by expiry instead of scanning them all).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "../src/cache/assumptions.h"

namespace {

using tessera::api::Duration;
using tessera::api::Pod;
using tessera::api::Time;
using tessera::cache::Assumptions;
using tessera::cache::PodReport;

/// What Assumptions keeps of binds, the plain way: every assumed bind with its expiry, scanned.
struct Model {
  std::map<std::string, Time> bound;
  std::vector<std::string> expire(Time now) {
    std::vector<std::string> gone;
    for (const auto& [key, expiry] : bound)
      if (expiry < now) gone.push_back(key);
    for (const auto& key : gone) bound.erase(key);
    return gone;
  }
};

}  // namespace

TEST_CASE("assumed binds expire as a scan of every one would expire them", "[assume]") {
  const Duration ttl{30};
  const Pod pending;  // no node: a bind of it may be assumed
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    Assumptions a(seed % 2 ? 1024 : 0);  // half the seeds rebuild the expiry queue often
    Model m;
    Time now{0};
    const int pods = 2 + pick(40);
    for (int step = 0; step < 400; ++step) {
      const std::string key = "ns/p" + std::to_string(pick(pods));
      PodReport r;
      r.podKey = key;
      r.node = "n1";
      switch (pick(8)) {
        case 0:
        case 1:  // the binder bound it
          r.op = PodReport::Op::AssumeBound;
          a.apply(r, &pending, now, ttl);
          m.bound[key] = now + ttl;
          break;
        case 2:  // a bind in flight, then (maybe much later) done
          r.op = PodReport::Op::AssumeBinding;
          a.apply(r, &pending, now, ttl);
          m.bound[key] = Assumptions::kInFlight;
          break;
        case 3:
          r.op = PodReport::Op::BindingDone;
          a.apply(r, &pending, now, ttl);
          if (auto it = m.bound.find(key); it != m.bound.end() && it->second == Assumptions::kInFlight)
            it->second = now + ttl;
          break;
        case 4:  // the watch shows it bound, or it is gone, or forgotten
          if (pick(3) == 0) a.podBound(key);
          else if (pick(2) == 0) a.podDeleted(key);
          else r.op = PodReport::Op::Forget, a.apply(r, &pending, now, ttl);
          m.bound.erase(key);
          break;
        default:  // a snapshot, the clock moved on
          now = now + Duration{pick(12)};
          const std::vector<std::string> gone = a.expireBinds(now);
          const std::vector<std::string> expected = m.expire(now);
          INFO("seed " << seed << ", step " << step);
          REQUIRE(gone == expected);
      }
      for (int p = 0; p < pods; ++p) {  // the same binds assumed, with the same expiries
        const std::string k = "ns/p" + std::to_string(p);
        const auto* b = a.bound(k);
        const auto it = m.bound.find(k);
        REQUIRE((b != nullptr) == (it != m.bound.end()));
        if (b) REQUIRE(b->expiry == it->second);
      }
    }
  }
}
