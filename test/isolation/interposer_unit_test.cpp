// In-process tests of the interposer's pure parts: configuration parsing, the pointer table and
// the shared accounting region. (These run instrumented under TESSERA_SANITIZE.)

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "process_runner.h"
#include "ptr_table.h"
#include "region.h"

using namespace tessera::interposer;  // NOLINT
using tessera::isolation_test::TempDir;

namespace {

std::map<std::string, std::string>* gFakeEnv = nullptr;

const char* fakeGetenv(const char* name) {
  auto it = gFakeEnv->find(name);
  return it == gFakeEnv->end() ? nullptr : it->second.c_str();
}

Config configFrom(std::map<std::string, std::string> env) {
  gFakeEnv = &env;
  auto cfg = std::make_unique<Config>();
  loadConfig(fakeGetenv, cfg.get());
  gFakeEnv = nullptr;
  return *cfg;
}

}  // namespace

TEST_CASE("GPU_MEMORY_LIMIT accepts only plain decimal byte counts", "[isolation][config]") {
  std::uint64_t v = 0;
  CHECK(parseDecimalBytes("1073741824", &v));
  CHECK(v == 1073741824ULL);
  CHECK(parseDecimalBytes("0", &v));
  CHECK(v == 0);
  CHECK(parseDecimalBytes("9223372036854775807", &v));
  for (const char* bad : {"1gb", "010g", "-5", "", "010", "+5", " 5", "5 ", "1e9", "0x10", "9223372036854775808",
                          "99999999999999999999", "1,000", "1G", "1Gi"}) {
    INFO("value '" << bad << "'");
    CHECK_FALSE(parseDecimalBytes(bad, &v));
  }
  CHECK_FALSE(parseDecimalBytes(nullptr, &v));
}

TEST_CASE("configuration fails closed with a message that names the problem", "[isolation][config]") {
  SECTION("absent") {
    Config cfg = configFrom({});
    CHECK_FALSE(cfg.valid);
    CHECK_THAT(cfg.error, Catch::Contains("GPU_MEMORY_LIMIT is not set"));
  }
  for (const char* bad : {"1gb", "010g", "-5", ""}) {
    DYNAMIC_SECTION("value '" << bad << "'") {
      Config cfg = configFrom({{"GPU_MEMORY_LIMIT", bad}});
      CHECK_FALSE(cfg.valid);
      CHECK_THAT(cfg.error, Catch::Contains("GPU_MEMORY_LIMIT='" + std::string(bad) + "'") &&
                                Catch::Contains("not a decimal byte count"));
    }
  }
  SECTION("valid, with defaults") {
    Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1048576"}});
    REQUIRE(cfg.valid);
    CHECK(cfg.defaultLimit == 1048576);
    CHECK(std::string(cfg.regionPath) == kDefaultRegionPath);
    CHECK(cfg.logLevel == LogLevel::kInfo);
  }
  SECTION("relative region path") {
    Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1"}, {"TESSERA_ISOLATION_REGION", "tmp/x"}});
    CHECK_FALSE(cfg.valid);
    CHECK_THAT(cfg.error, Catch::Contains("absolute path"));
  }
  SECTION("control characters are not echoed") {
    Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1\nfake log line"}});
    CHECK_FALSE(cfg.valid);
    CHECK(std::string(cfg.error).find('\n') == std::string::npos);
  }
}

TEST_CASE("identity and context reserve come from the environment", "[isolation][config]") {
  Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1000"},
                           {"TESSERA_POD_UID", "6f1c-uid"},
                           {"TESSERA_POD_NAMESPACE", "ml"},
                           {"TESSERA_POD_NAME", "trainer-0"},
                           {"TESSERA_CONTAINER_NAME", "main\nforged"}});
  REQUIRE(cfg.valid);
  CHECK(std::string(cfg.podUid) == "6f1c-uid");
  CHECK(std::string(cfg.podNamespace) == "ml");
  CHECK(std::string(cfg.podName) == "trainer-0");
  CHECK(std::string(cfg.containerName) == "main_forged");  // no control characters reach a label
  CHECK(cfg.contextReserve == (kDefaultContextReserveMiB << 20));
  CHECK(configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"TESSERA_CONTEXT_RESERVE_MIB", "0"}}).contextReserve == 0);
  CHECK(configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"TESSERA_CONTEXT_RESERVE_MIB", "300"}}).contextReserve ==
        300ULL << 20);
  Config bad = configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"TESSERA_CONTEXT_RESERVE_MIB", "300M"}});
  CHECK_FALSE(bad.valid);
  CHECK_THAT(bad.error, Catch::Contains("TESSERA_CONTEXT_RESERVE_MIB='300M'"));
}

TEST_CASE("per-device limits are keyed by GPU UUID", "[isolation][config]") {
  const std::string a = "GPU-7e55e7a0-0000-4000-8000-000000000000";
  const std::string b = "GPU-7E55E7A0-0000-4000-8000-000000000001";
  Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"TESSERA_GPU_MEMORY_LIMITS", a + "=5000," + b + "=7000"},
                           {"TESSERA_ISOLATION_LOG", "debug"}});
  REQUIRE(cfg.valid);
  CHECK(cfg.logLevel == LogLevel::kDebug);
  Uuid ua{}, ub{}, other{};
  REQUIRE(parseUuid(a.c_str(), a.size(), &ua));
  REQUIRE(parseUuid(b.c_str(), b.size(), &ub));
  other.bytes[0] = 1;
  CHECK(cfg.limitFor(ua) == 5000);
  CHECK(cfg.limitFor(ub) == 7000);
  CHECK(cfg.limitFor(other) == 1000);
  char text[48];
  formatUuid(ub, text);
  CHECK(std::string(text) == "GPU-7e55e7a0-0000-4000-8000-000000000001");

  for (const std::string& bad : std::vector<std::string>{a + "=1gb", a, "GPU-xyz=5", a + "=5," + a + "=6", a + "=5,"}) {
    INFO(bad);
    Config c = configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"TESSERA_GPU_MEMORY_LIMITS", bad}});
    CHECK_FALSE(c.valid);
    CHECK_THAT(c.error, Catch::Contains("TESSERA_GPU_MEMORY_LIMITS"));
  }
}

TEST_CASE("pointer table: insert, find, remove, reuse", "[isolation][table]") {
  auto table = std::make_unique<PtrTable<10>>();
  CHECK(table->insert(0x1000, 42));
  CHECK(table->insert(0, 7));  // a zero handle is representable
  CHECK(table->find(0x1000) == 42);
  CHECK(table->find(0) == 7);
  CHECK(table->find(0x2000) == 0);
  CHECK(table->remove(0x1000) == 42);
  CHECK(table->remove(0x1000) == 0);  // a double free credits once
  CHECK(table->remove(0x3000) == 0);  // unknown
  // Churn far beyond capacity: tombstones are reused.
  for (std::uint64_t i = 1; i <= 100000; ++i) {
    REQUIRE(table->insert(i << 21, i));
    REQUIRE(table->remove(i << 21) == i);
  }
  // Fill until a probe window is full: insert reports it instead of losing the entry.
  int inserted = 0;
  while (table->insert(0x10000000ULL + static_cast<std::uint64_t>(inserted) * 4096, 1)) ++inserted;
  CHECK(inserted >= 512);
  CHECK(inserted <= 1024);
}

TEST_CASE("pointer table is safe under concurrent alloc/free", "[isolation][table]") {
  auto table = std::make_unique<PtrTable<14>>();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < 20000; ++i) {
        std::uint64_t key = (static_cast<std::uint64_t>(t) << 40) | (i << 9);
        if (!table->insert(key, i + 1)) ++failures;
        if (table->remove(key) != i + 1) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
}

namespace {

struct MappedRegion {
  RegionLayout* layout = nullptr;
  explicit MappedRegion(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    void* mem = mmap(nullptr, sizeof(RegionLayout), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    REQUIRE(mem != MAP_FAILED);
    layout = static_cast<RegionLayout*>(mem);
  }
  ~MappedRegion() { munmap(layout, sizeof(RegionLayout)); }
};

}  // namespace

TEST_CASE("region: create, register, reserve within the limit, release", "[isolation][region]") {
  TempDir dir;
  const std::string path = dir.path("region");
  auto region = std::make_unique<Region>();
  char error[512] = {};
  REQUIRE(region->open(path.c_str(), error, sizeof error));
  REQUIRE(region->attachProcess(ProcessIdentity{}, error, sizeof error));
  Uuid uuid{};
  uuid.bytes[0] = 0xab;
  std::uint64_t limit = 0;
  int dev = region->registerDevice(uuid, 1000, &limit);
  REQUIRE(dev >= 0);
  CHECK(limit == 1000);
  CHECK(region->findDevice(uuid) == dev);
  std::uint64_t used = 0;
  CHECK(region->reserve(dev, 600, limit, &used));
  CHECK_FALSE(region->reserve(dev, 600, limit, &used));
  CHECK(used == 600);
  CHECK(region->reserve(dev, 400, limit, &used));
  CHECK_FALSE(region->reserve(dev, 1, limit, &used));
  region->release(dev, 600);
  CHECK(region->used(dev) == 400);
  region->release(dev, 10000);  // saturates instead of wrapping
  CHECK(region->used(dev) == 0);

  // A second process (here: a second mapping) sees the same device with the lower limit rule.
  auto second = std::make_unique<Region>();
  REQUIRE(second->open(path.c_str(), error, sizeof error));
  std::uint64_t limit2 = 0;
  CHECK(second->registerDevice(uuid, 5000, &limit2) == dev);
  CHECK(limit2 == 1000);

  MappedRegion mapped(path);
  CHECK(mapped.layout->header.magic == kRegionMagic);
  CHECK(mapped.layout->header.version == kRegionVersion);
  CHECK(mapped.layout->devices[dev].peak.load() == 1000);
}

TEST_CASE("region: a header of another version fails closed", "[isolation][region]") {
  TempDir dir;
  const std::string path = dir.path("region");
  {
    std::ofstream f(path, std::ios::binary);
    RegionHeader h{};
    h.magic = kRegionMagic;
    h.version = kRegionVersion + 1;
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
  }
  auto region = std::make_unique<Region>();
  char error[512] = {};
  CHECK_FALSE(region->open(path.c_str(), error, sizeof error));
  CHECK_THAT(error, Catch::Contains("unknown format") && Catch::Contains(path));
}

TEST_CASE("region: usage of a dead process is reclaimed", "[isolation][region]") {
  TempDir dir;
  const std::string path = dir.path("region");
  Uuid uuid{};
  uuid.bytes[3] = 7;
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child charges 800 bytes and dies without releasing them.
    Region r;
    char error[512];
    std::uint64_t limit = 0, used = 0;
    bool ok = r.open(path.c_str(), error, sizeof error) && r.attachProcess(ProcessIdentity{}, error, sizeof error);
    int dev = ok ? r.registerDevice(uuid, 1000, &limit) : -1;
    _exit(dev >= 0 && r.reserve(dev, 800, limit, &used) ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  auto region = std::make_unique<Region>();
  char error[512] = {};
  REQUIRE(region->open(path.c_str(), error, sizeof error));
  REQUIRE(region->attachProcess(ProcessIdentity{}, error, sizeof error));  // attaching reclaims dead slots
  std::uint64_t limit = 0, used = 0;
  int dev = region->registerDevice(uuid, 1000, &limit);
  REQUIRE(dev >= 0);
  CHECK(region->used(dev) == 0);
  CHECK(region->reserve(dev, 1000, limit, &used));
}

TEST_CASE("region: a live process's slot is never reclaimed, whoever looks", "[isolation][region]") {
  TempDir dir;
  const std::string path = dir.path("region");
  Uuid uuid{};
  uuid.bytes[1] = 9;
  char error[512] = {};
  std::uint64_t limit = 0, used = 0;
  // Two Regions in one process stand for two processes: each holds its slot's lock on its own
  // open file description, which the other sees.
  auto first = std::make_unique<Region>();
  REQUIRE(first->open(path.c_str(), error, sizeof error));
  ProcessIdentity a;
  a.podUid = "0f1e2d3c-uid";
  a.podNamespace = "ml";
  a.podName = "trainer-0";
  a.container = "main";
  REQUIRE(first->attachProcess(a, error, sizeof error));
  int dev = first->registerDevice(uuid, 1000, &limit);
  REQUIRE(dev >= 0);
  REQUIRE(first->reserve(dev, 700, limit, &used));

  auto second = std::make_unique<Region>();
  REQUIRE(second->open(path.c_str(), error, sizeof error));
  ProcessIdentity b;
  b.podUid = "another-uid-is-ignored";
  b.container = "sidecar";
  REQUIRE(second->attachProcess(b, error, sizeof error));  // reclaims only dead slots
  REQUIRE(second->registerDevice(uuid, 1000, &limit) == dev);
  CHECK(second->reclaimDead() == 0);
  CHECK(second->used(dev) == 700);
  CHECK_FALSE(second->reserve(dev, 301, limit, &used));
  second->countRefusal(dev);
  CHECK(second->reserve(dev, 300, limit, &used));
  CHECK(second->usedBySelf(dev) == 300);

  const RegionLayout* layout = second->layout();
  CHECK(std::string(layout->pod.uid) == "0f1e2d3c-uid");  // the first process to know it wins
  CHECK(std::string(layout->pod.namespace_) == "ml");
  CHECK(std::string(layout->pod.name) == "trainer-0");
  CHECK(std::string(layout->containers[0].name) == "main");
  CHECK(std::string(layout->containers[1].name) == "sidecar");
  CHECK(layout->containers[1].refused[dev].load() == 1);
  CHECK(layout->containers[0].refused[dev].load() == 0);
  CHECK(layout->devices[dev].refused.load() == 1);
  int liveSlots = 0;
  for (int i = 0; i < kMaxProcs; ++i) liveSlots += second->slotAlive(i) ? 1 : 0;
  CHECK(liveSlots == 1);  // the first one's (a Region does not count its own)

  // The first "process" goes away: its slot's lock goes with its descriptor, and the usage with it.
  first->close();
  first.reset();
  CHECK(second->reclaimDead() == 700);
  CHECK(second->used(dev) == 300);
  second->close();
}

TEST_CASE("readProcStat parses our own start time", "[isolation][region]") {
  std::uint64_t start = 0;
  char state = 0;
  REQUIRE(readProcStat(getpid(), &start, &state));
  CHECK(start > 0);
  CHECK(state == 'R');
}
