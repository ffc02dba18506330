#include <catch2/catch.hpp>

#include "tessera/api/resources.h"

using namespace tessera::api;

namespace {
Resources make(int64_t cpu, int64_t mem, int64_t gpu) {
  Resources r;
  r.milliCpu = cpu;
  r.memory = mem;
  r.milliGpu = gpu;
  return r;
}
}  // namespace

TEST_CASE("resources: get/set by Kubernetes name", "[resources]") {
  Resources r;
  r.set("cpu", 1500);
  r.set("memory", 1024);
  r.set("nvidia.com/gpu", 2000);
  r.set("pods", 7);  // not stored
  r.set("example.com/fpga", 2);
  r.set("a.io/x", 1);
  CHECK(r.milliCpu == 1500);
  CHECK(r.memory == 1024);
  CHECK(r.milliGpu == 2000);
  CHECK(r.get("cpu") == 1500);
  CHECK(r.get("nvidia.com/gpu") == 2000);
  CHECK(r.get("pods") == 0);
  CHECK(r.get("example.com/fpga") == 2);
  CHECK(r.get("nothing") == 0);
  REQUIRE(r.scalars.size() == 2);
  CHECK(r.scalars[0].first == "a.io/x");  // sorted
  CHECK(r.scalars[1].first == "example.com/fpga");
  r.set("example.com/fpga", 5);
  CHECK(r.scalars.size() == 2);
  CHECK(r.get("example.com/fpga") == 5);
}

TEST_CASE("resources: arithmetic merges scalars", "[resources]") {
  Resources a = make(1000, 10, 0);
  a.set("x/b", 2);
  Resources b = make(500, 5, 1000);
  b.set("x/a", 1);
  b.set("x/b", 3);
  b.set("x/c", 4);
  Resources s = a + b;
  CHECK(s.milliCpu == 1500);
  CHECK(s.memory == 15);
  CHECK(s.milliGpu == 1000);
  CHECK(s.get("x/a") == 1);
  CHECK(s.get("x/b") == 5);
  CHECK(s.get("x/c") == 4);
  REQUIRE(s.scalars.size() == 3);
  CHECK(s.scalars[0].first == "x/a");
  CHECK(s.scalars[2].first == "x/c");
  Resources d = s - b;
  CHECK(d == a);
  CHECK(d.scalars.size() == 3);  // touched entries are kept (zero) until normalize()
  d.normalize();
  CHECK(d.scalars.size() == 1);
  CHECK(d == a);
}

TEST_CASE("resources: equality treats absent scalars as zero", "[resources]") {
  Resources a = make(1, 2, 3);
  Resources b = make(1, 2, 3);
  b.set("x/y", 0);
  CHECK(a == b);
  b.set("x/y", 1);
  CHECK_FALSE(a == b);
  CHECK_FALSE(make(1, 2, 3) == make(1, 2, 4));
}

TEST_CASE("resources: maxWith", "[resources]") {
  Resources a = make(1000, 50, 0);
  a.set("x/a", 5);
  Resources b = make(500, 100, 2000);
  b.set("x/a", 1);
  b.set("x/b", 3);
  a.maxWith(b);
  CHECK(a.milliCpu == 1000);
  CHECK(a.memory == 100);
  CHECK(a.milliGpu == 2000);
  CHECK(a.get("x/a") == 5);
  CHECK(a.get("x/b") == 3);
}

TEST_CASE("resources: fitsIn and insufficient", "[resources]") {
  Resources cap = make(4000, 1 << 20, 2000);
  cap.set("example.com/fpga", 2);
  Resources req = make(4000, 1 << 20, 2000);
  CHECK(req.fitsIn(cap));
  req.set("example.com/fpga", 2);
  CHECK(req.fitsIn(cap));
  req.set("example.com/fpga", 3);
  CHECK_FALSE(req.fitsIn(cap));
  req.set("example.com/fpga", 0);
  req.set("other.io/thing", 1);  // absent in capacity = 0
  CHECK_FALSE(req.fitsIn(cap));
  req.set("other.io/thing", 0);
  req.milliGpu = 2001;
  CHECK_FALSE(req.fitsIn(cap));
  req.milliCpu = 5000;
  req.set("other.io/thing", 1);
  std::vector<std::string> why;
  req.insufficient(cap, why);
  CHECK(why == std::vector<std::string>{"cpu", "nvidia.com/gpu", "other.io/thing"});
  CHECK(Resources{}.fitsIn(Resources{}));
}

TEST_CASE("resources: isZero and toString", "[resources]") {
  CHECK(Resources{}.isZero());
  Resources r;
  r.set("x/a", 0);
  CHECK(r.isZero());
  r.set("x/a", 1);
  CHECK_FALSE(r.isZero());
  CHECK(Resources{}.toString() == "");
  Resources s = make(4000, 32LL << 30, 1000);
  CHECK(s.toString() == "cpu: 4, memory: 32Gi, nvidia.com/gpu: 1");
  s.milliCpu = 500;
  s.milliGpu = 500;
  s.memory = 0;
  s.set("example.com/fpga", 2);
  s.set("a.io/zero", 0);
  CHECK(s.toString() == "cpu: 500m, nvidia.com/gpu: 0.5, example.com/fpga: 2");
}
