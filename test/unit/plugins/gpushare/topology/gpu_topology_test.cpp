// tessera.dev/gpu-topology: parsing (good and malformed annotations, errors naming the node, the
// annotation and the field), NVLink islands, and the choice of k GPUs against tables worked out by
// hand. Scores: 10 × (NVLinks among the chosen) − (NVLinks from the chosen to free GPUs left).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tessera/plugins/gpu_topology.h"

namespace {

using namespace tessera::plugins::gputopo;
using V = std::vector<int>;

/// A topology from rows of cells; "." stands for "SYS" to keep the tables readable.
GpuTopology topo(const std::vector<std::vector<std::string>>& rows) {
  std::string json = "{\"matrix\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    json += i ? ",[" : "[";
    for (size_t j = 0; j < rows[i].size(); ++j)
      json += std::string(j ? "," : "") + "\"" + (rows[i][j] == "." ? "SYS" : rows[i][j]) + "\"";
    json += "]";
  }
  json += "]}";
  auto t = parseGpuTopology("n1", json);
  INFO(json);
  REQUIRE(t.ok());
  return std::move(t).value();
}

/// DGX-1-like 8 GPUs: two quads (0-3, 4-7), fully NVLinked inside (NV1 or NV2), and 0-4, 1-5, 2-6,
/// 3-7 across (NV1): one island of 8.
GpuTopology dgx1() {
  return topo({{"X", "NV1", "NV1", "NV2", "NV2", ".", ".", "."},
               {"NV1", "X", "NV2", "NV1", ".", "NV2", ".", "."},
               {"NV1", "NV2", "X", "NV2", ".", ".", "NV1", "."},
               {"NV2", "NV1", "NV2", "X", ".", ".", ".", "NV1"},
               {"NV2", ".", ".", ".", "X", "NV1", "NV1", "NV2"},
               {".", "NV2", ".", ".", "NV1", "X", "NV2", "NV1"},
               {".", ".", "NV1", ".", "NV1", "NV2", "X", "NV2"},
               {".", ".", ".", "NV1", "NV2", "NV1", "NV2", "X"}});
}

/// Two NVLink pairs and two PCIe-only GPUs: islands {0,1} (NV4), {2,3} (NV12), {4}, {5}.
GpuTopology pairs() {
  return topo({{"X", "NV4", "PIX", "PXB", "SYS", "SYS"},
               {"NV4", "X", "PXB", "PIX", "SYS", "SYS"},
               {"PIX", "PXB", "X", "NV12", "NODE", "SYS"},
               {"PXB", "PIX", "NV12", "X", "SYS", "PHB"},
               {"SYS", "SYS", "NODE", "SYS", "X", "PIX"},
               {"SYS", "SYS", "SYS", "PHB", "PIX", "X"}});
}

}  // namespace

TEST_CASE("gpu-topology parses the nvidia-smi topo -m matrix") {
  auto t = parseGpuTopology("n1", R"({"version": 1, "gpus": ["GPU-a", "GPU-b", "GPU-c"],
      "matrix": [["X", "NV12", "SYS"], ["NV12", "X", "PHB"], ["SYS", "PHB", "X"]]})");
  REQUIRE(t.ok());
  CHECK(t->gpuCount == 3);
  CHECK(t->uuids == std::vector<std::string>{"GPU-a", "GPU-b", "GPU-c"});
  CHECK(t->links(0, 1) == 12);
  CHECK(t->links(1, 0) == 12);
  CHECK(t->links(0, 2) == 0);
  CHECK(t->links(0, 7) == 0);
  CHECK(t->kind(1, 2) == LinkKind::Phb);
  CHECK(t->kind(2, 2) == LinkKind::Self);
  CHECK(linkText(LinkKind::NvLink, 12) == "NV12");
  CHECK(nvlinkIslands(*t) == std::vector<V>{{0, 1}, {2}});
}

TEST_CASE("gpu-topology: malformed annotations are errors naming the node, the annotation and the field") {
  const std::string prefix = "Node n7: annotation tessera.dev/gpu-topology: ";
  struct Case {
    const char* json;
    const char* message;  // after the prefix
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {"{\"matrix\": [[\"X\"]", "not valid JSON"},
      {"[]", "expected a JSON object with \"matrix\", got a list"},
      {"{}", "matrix: required"},
      {"{\"matrix\": {}}", "matrix: expected a list of rows, got an object"},
      {"{\"matrix\": []}", "matrix: is empty"},
      {"{\"matrix\": [\"X\"]}", "matrix[0]: expected a list of 1 cells, got a string"},
      {"{\"matrix\": [[\"X\", \"NV1\"], [\"NV1\"]]}",
       "matrix[1]: has 1 cells; the matrix has 2 rows (it must be square)"},
      {"{\"matrix\": [[\"X\", \"NVx\"], [\"NV1\", \"X\"]]}",
       "matrix[0][1]: \"NVx\" is not a link type (expected X, NV<n> with n in 1..64, PIX, PXB, PHB, NODE or SYS)"},
      {"{\"matrix\": [[\"X\", \"NV0\"], [\"NV0\", \"X\"]]}",
       "matrix[0][1]: \"NV0\" is not a link type (expected X, NV<n> with n in 1..64, PIX, PXB, PHB, NODE or SYS)"},
      {"{\"matrix\": [[\"X\", \"NV65\"], [\"NV65\", \"X\"]]}",
       "matrix[0][1]: \"NV65\" is not a link type (expected X, NV<n> with n in 1..64, PIX, PXB, PHB, NODE or SYS)"},
      {"{\"matrix\": [[\"X\", \"nv1\"], [\"NV1\", \"X\"]]}",
       "matrix[0][1]: \"nv1\" is not a link type (expected X, NV<n> with n in 1..64, PIX, PXB, PHB, NODE or SYS)"},
      {"{\"matrix\": [[\"X\", 4], [\"NV1\", \"X\"]]}",
       "matrix[0][1]: expected a string such as \"NV12\" or \"SYS\", got a number"},
      {"{\"matrix\": [[\"NV1\", \"NV1\"], [\"NV1\", \"X\"]]}",
       "matrix[0][0]: \"NV1\": the diagonal must be \"X\" (a GPU to itself)"},
      {"{\"matrix\": [[\"X\", \"X\"], [\"X\", \"X\"]]}", "matrix[0][1]: \"X\" is only valid on the diagonal"},
      {"{\"matrix\": [[\"X\", \"NV2\"], [\"NV1\", \"X\"]]}",
       "matrix[0][1]: \"NV2\" differs from matrix[1][0] \"NV1\" (links are symmetric)"},
      {"{\"matrix\": [[\"X\", \"SYS\"], [\"PIX\", \"X\"]]}",
       "matrix[0][1]: \"SYS\" differs from matrix[1][0] \"PIX\" (links are symmetric)"},
      {"{\"matrix\": [[\"X\"]], \"links\": []}", "links: unknown field (valid: version, gpus, matrix)"},
      {"{\"matrix\": [[\"X\"]], \"version\": 2}", "version: 2 is not a supported version (1)"},
      {"{\"matrix\": [[\"X\"]], \"version\": \"1\"}", "version: \"1\" is not a supported version (1)"},
      {"{\"matrix\": [[\"X\"]], \"gpus\": \"GPU-a\"}", "gpus: expected a list of GPU UUIDs, got a string"},
      {"{\"matrix\": [[\"X\"]], \"gpus\": []}", "gpus: has 0 entries; the matrix has 1 rows (one UUID per row)"},
      {"{\"matrix\": [[\"X\"]], \"gpus\": [\"\"]}", "gpus[0]: expected a non-empty GPU UUID string, got \"\""},
      {"{\"matrix\": [[\"X\"]], \"gpus\": [null]}", "gpus[0]: expected a non-empty GPU UUID string, got null"},
      {"{\"matrix\": [[\"X\", \"NV1\"], [\"NV1\", \"X\"]], \"gpus\": [\"GPU-a\", \"GPU-a\"]}",
       "gpus[1]: \"GPU-a\" is listed twice"},
  };
  for (const auto& c : cases) {
    INFO(c.json);
    auto t = parseGpuTopology("n7", c.json);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message == prefix + c.message);
    CHECK(t.error().code == 422);
  }
  SECTION("too many GPUs") {
    std::string json = "{\"matrix\": [";
    for (int i = 0; i <= kMaxGpus; ++i) json += std::string(i ? "," : "") + "[]";
    json += "]}";
    auto t = parseGpuTopology("n7", json);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message == prefix + "matrix: 257 rows: at most 256 GPUs");
  }
  SECTION("control characters in a bad value are escaped") {
    auto t = parseGpuTopology("n7", "{\"matrix\": [[\"X\\n\"]]}");
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message.find("\"X\\x0a\" is not a link type") != std::string::npos);
  }
}

TEST_CASE("gpu-topology: a node without the annotation has no topology; a bad one is an error") {
  tessera::api::Node node;
  node.meta.name = "gpu-3";
  auto none = nodeGpuTopology(node);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  node.meta.annotations[kGpuTopologyAnnotation] = R"({"matrix": [["X","NV1"],["NV1","X"]]})";
  auto some = nodeGpuTopology(node);
  REQUIRE(some.ok());
  REQUIRE(some->has_value());
  CHECK((*some)->gpuCount == 2);
  node.meta.annotations[kGpuTopologyAnnotation] = "nvlink everywhere";
  auto bad = nodeGpuTopology(node);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "Node gpu-3: annotation tessera.dev/gpu-topology: not valid JSON");
}

TEST_CASE("gpu-topology: NVLink islands over all or some devices") {
  const GpuTopology t = pairs();
  CHECK(nvlinkIslands(t) == std::vector<V>{{0, 1}, {2, 3}, {4}, {5}});
  CHECK(nvlinkIslands(t, {5, 3, 1, 2, 3}) == std::vector<V>{{1}, {2, 3}, {5}});
  CHECK(nvlinkIslands(t, {9, 0, 1}) == std::vector<V>{{0, 1}, {9}});  // 9: outside the matrix, isolated
  CHECK(nvlinkIslands(dgx1()) == std::vector<V>{{0, 1, 2, 3, 4, 5, 6, 7}});
  // Without 0..3, the rest of a DGX-1 is still one quad.
  CHECK(nvlinkIslands(dgx1(), {4, 5, 6, 7}) == std::vector<V>{{4, 5, 6, 7}});
  // A chain 0-1-2-3 with 1 busy breaks into {0} and {2,3}.
  GpuTopology chain =
      topo({{"X", "NV1", ".", "."}, {"NV1", "X", "NV1", "."}, {".", "NV1", "X", "NV1"}, {".", ".", "NV1", "X"}});
  CHECK(nvlinkIslands(chain, {0, 2, 3}) == std::vector<V>{{0}, {2, 3}});
}

TEST_CASE("gpu-topology: choosing k GPUs (tables)") {
  struct Case {
    const char* name;
    GpuTopology topology;
    V free;
    int k;
    V devices;
    int islands;
    int64_t link, cut;
  };
  const GpuTopology p = pairs();
  const GpuTopology d = dgx1();
  // A ring 0-1-2-3-0 (NV2 each): choosing 2 neighbours severs 2 links (score 10·2 − 2·2 = 16);
  // choosing opposite GPUs severs 4 and links none (−8).
  const GpuTopology ring =
      topo({{"X", "NV2", ".", "NV2"}, {"NV2", "X", "NV2", "."}, {".", "NV2", "X", "NV2"}, {"NV2", ".", "NV2", "X"}});
  // Islands of 4 ({0..3}, NV1 all pairs) and of 2 ({4,5}, NV1).
  const GpuTopology fourTwo = topo({{"X", "NV1", "NV1", "NV1", ".", "."},
                                    {"NV1", "X", "NV1", "NV1", ".", "."},
                                    {"NV1", "NV1", "X", "NV1", ".", "."},
                                    {"NV1", "NV1", "NV1", "X", ".", "."},
                                    {".", ".", ".", ".", "X", "NV1"},
                                    {".", ".", ".", ".", "NV1", "X"}});
  const Case cases[] = {
      // One GPU: the isolated one (best fit: an island of 1), nothing severed.
      {"k=1 takes an isolated GPU", p, {0, 1, 2, 3, 4, 5}, 1, {4}, 1, 0, 0},
      // Two: both pairs fit; equal size, the NV12 pair scores 120 against 40.
      {"k=2 takes the stronger of two equal pairs", p, {0, 1, 2, 3, 4, 5}, 2, {2, 3}, 1, 12, 0},
      {"k=2 with the strong pair half busy", p, {0, 1, 2, 4, 5}, 2, {0, 1}, 1, 4, 0},
      // Three: no island of 3; the largest island (0,1: first of the two pairs) whole, then the rest
      // best fit: the isolated 4.
      {"k=3 spans islands: largest whole, then best fit", p, {0, 1, 2, 3, 4, 5}, 3, {0, 1, 4}, 2, 4, 0},
      {"k=6 takes everything", p, {0, 1, 2, 3, 4, 5}, 6, {0, 1, 2, 3, 4, 5}, 4, 16, 0},
      // Best fit: the 2-island rather than breaking the 4-island.
      {"k=2 best fit keeps the big island intact", fourTwo, {0, 1, 2, 3, 4, 5}, 2, {4, 5}, 1, 1, 0},
      {"k=3 goes to the 4-island", fourTwo, {0, 1, 2, 3, 4, 5}, 3, {0, 1, 2}, 1, 3, 3},
      {"k=4 takes the 4-island whole", fourTwo, {0, 1, 2, 3, 4, 5}, 4, {0, 1, 2, 3}, 1, 6, 0},
      {"k=5 spans: the 4-island whole, then one of the pair", fourTwo, {0, 1, 2, 3, 4, 5}, 5, {0, 1, 2, 3, 4}, 2, 6, 1},
      // Ring: neighbours, lowest indices among the equal choices.
      {"ring k=2 takes neighbours", ring, {0, 1, 2, 3}, 2, {0, 1}, 1, 2, 4},
      {"ring k=2 with 0 busy: the chain 1-2-3, take the end pair", ring, {1, 2, 3}, 2, {1, 2}, 1, 2, 2},
      {"ring k=3", ring, {0, 1, 2, 3}, 3, {0, 1, 2}, 1, 4, 4},
      // DGX-1, 4 GPUs: every GPU has 6 links, so score = 10·I − (24 − 2·I): the most links inside
      // wins. A quad has 0-1 1 + 0-2 1 + 0-3 2 + 1-2 2 + 1-3 1 + 2-3 2 = 9 inside, 6 to the other
      // quad; no other 4 GPUs have more; of the two quads the lower.
      {"dgx1 k=4 takes a quad", d, {0, 1, 2, 3, 4, 5, 6, 7}, 4, {0, 1, 2, 3}, 1, 9, 6},
      // 2 GPUs on a full DGX-1: the strongest pair with the fewest severed links: {0,3} NV2 ... every
      // NV2 pair scores 20 − (cut): 0-3 cuts 0-1,0-2,0-4(2),3-1,3-2(2),3-7 = 1+1+2+1+2+1 = 8 -> 12.
      {"dgx1 k=2 takes an NV2 pair", d, {0, 1, 2, 3, 4, 5, 6, 7}, 2, {0, 3}, 1, 2, 8},
      // A half-busy DGX-1 (0,1,2 busy): 3..7 free; {4,5,6,7} is a quad; k=4 takes it, severs 3-7.
      {"dgx1 k=4 with three busy", d, {3, 4, 5, 6, 7}, 4, {4, 5, 6, 7}, 1, 9, 1},
      // Free devices outside the matrix are GPUs without NVLink.
      {"devices beyond the matrix are isolated", p, {0, 1, 8}, 1, {8}, 1, 0, 0},
      {"duplicates and negatives are ignored", p, {1, 1, 0, -3}, 2, {0, 1}, 1, 4, 0},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto choice = chooseGpus(c.topology, c.free, c.k);
    REQUIRE(choice.has_value());
    CHECK(choice->devices == c.devices);
    CHECK(choice->islandsUsed == c.islands);
    CHECK(choice->linkWeight == c.link);
    CHECK(choice->cutWeight == c.cut);
    CHECK(choice->score == 10 * c.link - c.cut);
  }
}

TEST_CASE("gpu-topology: not enough free GPUs, k = 0, and no topology at all") {
  const GpuTopology p = pairs();
  CHECK_FALSE(chooseGpus(p, {0, 1}, 3).has_value());
  CHECK_FALSE(chooseGpus(p, {}, 1).has_value());
  CHECK_FALSE(chooseGpus(p, {1, 1, 1}, 2).has_value());
  auto zero = chooseGpus(p, {0, 1}, 0);
  REQUIRE(zero.has_value());
  CHECK(zero->devices.empty());
  CHECK(zero->score == 0);
  // An empty topology: every GPU is alone; the lowest indices win.
  auto plain = chooseGpus(GpuTopology{}, {7, 3, 5}, 2);
  REQUIRE(plain.has_value());
  CHECK(plain->devices == V{3, 5});
  CHECK(plain->islandsUsed == 2);
}

TEST_CASE("gpu-topology: scores rank nodes (better island, less fragmentation)") {
  const GpuTopology p = pairs();
  // k=1: an isolated GPU (score 0) beats breaking a pair (score −4).
  CHECK(chooseGpus(p, {4}, 1)->score == 0);
  CHECK(chooseGpus(p, {0, 1}, 1)->score == -4);
  // k=2: NV12 pair (120) > NV4 pair (40) > two PCIe GPUs (0).
  CHECK(chooseGpus(p, {2, 3}, 2)->score == 120);
  CHECK(chooseGpus(p, {0, 1}, 2)->score == 40);
  CHECK(chooseGpus(p, {4, 5}, 2)->score == 0);
}

TEST_CASE("gpu-topology: large islands use the greedy search and stay deterministic") {
  // 32 GPUs all NVLinked (NVSwitch: NV18 everywhere): C(32,16) subsets is far past the exact limit.
  std::vector<std::vector<std::string>> rows(32, std::vector<std::string>(32, "NV18"));
  for (int i = 0; i < 32; ++i) rows[i][i] = "X";
  const GpuTopology sw = topo(rows);
  std::vector<int> all;
  for (int i = 31; i >= 0; --i) all.push_back(i);
  auto c = chooseGpus(sw, all, 16);
  REQUIRE(c.has_value());
  V expected;
  for (int i = 0; i < 16; ++i) expected.push_back(i);
  CHECK(c->devices == expected);
  CHECK(c->linkWeight == 18 * 16 * 15 / 2);
  CHECK(c->cutWeight == 18 * 16 * 16);
  // Two 16-GPU switch domains joined by nothing: k=8 fits the first domain.
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 32; ++j)
      if (i != j && (i < 16) != (j < 16)) rows[i][j] = "SYS";
  const GpuTopology two = topo(rows);
  auto c2 = chooseGpus(two, {20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 8);
  REQUIRE(c2.has_value());
  CHECK(c2->devices == V{3, 4, 5, 6, 7, 8, 9, 10});  // best fit: 9 free there, 10 in the other domain
  CHECK(c2->islandsUsed == 1);
}
