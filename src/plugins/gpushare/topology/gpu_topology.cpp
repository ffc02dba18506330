// The node GPU link matrix (tessera.dev/gpu-topology), NVLink islands with Boost.Graph, and the
// best-fit choice of k GPUs. See include/tessera/plugins/gpu_topology.h for the rules.
#include "tessera/plugins/gpu_topology.h"

#include "tessera/api/text.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <set>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <nlohmann/json.hpp>

namespace tessera::plugins::gputopo {

namespace {

using Json = nlohmann::json;

std::string quoted(const std::string& v) { return api::quoteValue(v); }

std::string jsonType(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "a list";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::binary: return "binary data";
    case Json::value_t::discarded: return "invalid";
    default: return "a number";
  }
}

struct Ctx {
  std::string prefix;
  api::Error err(const std::string& field, const std::string& what) const {
    return api::makeError(prefix + (field.empty() ? "" : field + ": ") + what, 422);
  }
};

/// A matrix cell: the kind and, for NVLink, the bonded link count.
std::optional<std::pair<LinkKind, int>> parseCell(const std::string& s) {
  if (s == "X") return std::pair{LinkKind::Self, 0};
  if (s == "PIX") return std::pair{LinkKind::Pix, 0};
  if (s == "PXB") return std::pair{LinkKind::Pxb, 0};
  if (s == "PHB") return std::pair{LinkKind::Phb, 0};
  if (s == "NODE") return std::pair{LinkKind::Node, 0};
  if (s == "SYS" || s == "SOC") return std::pair{LinkKind::Sys, 0};  // SOC: older drivers' name for SYS
  if (s.size() > 2 && s.size() <= 4 && s[0] == 'N' && s[1] == 'V') {
    int n = 0;
    auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), n);
    if (ec == std::errc() && p == s.data() + s.size() && s[2] != '0' && n >= 1 && n <= kMaxLinks)
      return std::pair{LinkKind::NvLink, n};
  }
  return std::nullopt;
}

api::Result<GpuTopology> parseImpl(const Ctx& c, const std::string& text) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return c.err("", "not valid JSON");
  if (!doc.is_object()) return c.err("", "expected a JSON object with \"matrix\", got " + jsonType(doc));
  for (const auto& [key, value] : doc.items())
    if (key != "matrix" && key != "gpus" && key != "version")
      return c.err(key, "unknown field (valid: version, gpus, matrix)");
  if (auto v = doc.find("version"); v != doc.end())
    if (!v->is_number_integer() || v->get<int64_t>() != 1)
      return c.err("version", v->dump() + " is not a supported version (1)");
  auto m = doc.find("matrix");
  if (m == doc.end()) return c.err("matrix", "required");
  if (!m->is_array()) return c.err("matrix", "expected a list of rows, got " + jsonType(*m));
  const size_t n = m->size();
  if (n == 0) return c.err("matrix", "is empty");
  if (n > static_cast<size_t>(kMaxGpus))
    return c.err("matrix", std::to_string(n) + " rows: at most " + std::to_string(kMaxGpus) + " GPUs");
  GpuTopology t;
  t.gpuCount = static_cast<int>(n);
  t.kinds.assign(n * n, LinkKind::Sys);
  t.nvlinks.assign(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Json& row = (*m)[i];
    const std::string rp = "matrix[" + std::to_string(i) + "]";
    if (!row.is_array()) return c.err(rp, "expected a list of " + std::to_string(n) + " cells, got " + jsonType(row));
    if (row.size() != n)
      return c.err(rp, "has " + std::to_string(row.size()) + " cells; the matrix has " + std::to_string(n) +
                           " rows (it must be square)");
    for (size_t j = 0; j < n; ++j) {
      const std::string cp = rp + "[" + std::to_string(j) + "]";
      const Json& cell = row[j];
      if (!cell.is_string()) return c.err(cp, "expected a string such as \"NV12\" or \"SYS\", got " + jsonType(cell));
      const std::string& s = cell.get_ref<const std::string&>();
      auto parsed = parseCell(s);
      if (!parsed)
        return c.err(cp, quoted(s) + " is not a link type (expected X, NV<n> with n in 1.." +
                             std::to_string(kMaxLinks) + ", PIX, PXB, PHB, NODE or SYS)");
      if ((i == j) != (parsed->first == LinkKind::Self))
        return c.err(cp, i == j ? quoted(s) + ": the diagonal must be \"X\" (a GPU to itself)"
                                : "\"X\" is only valid on the diagonal");
      t.kinds[i * n + j] = parsed->first;
      t.nvlinks[i * n + j] = parsed->second;
    }
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (t.kinds[i * n + j] != t.kinds[j * n + i] || t.nvlinks[i * n + j] != t.nvlinks[j * n + i])
        return c.err("matrix[" + std::to_string(i) + "][" + std::to_string(j) + "]",
                     quoted(linkText(t.kinds[i * n + j], t.nvlinks[i * n + j])) + " differs from matrix[" +
                         std::to_string(j) + "][" + std::to_string(i) + "] " +
                         quoted(linkText(t.kinds[j * n + i], t.nvlinks[j * n + i])) + " (links are symmetric)");
  if (auto g = doc.find("gpus"); g != doc.end()) {
    if (!g->is_array()) return c.err("gpus", "expected a list of GPU UUIDs, got " + jsonType(*g));
    if (g->size() != n)
      return c.err("gpus", "has " + std::to_string(g->size()) + " entries; the matrix has " + std::to_string(n) +
                               " rows (one UUID per row)");
    std::set<std::string> seen;
    for (size_t i = 0; i < n; ++i) {
      const Json& u = (*g)[i];
      const std::string p = "gpus[" + std::to_string(i) + "]";
      if (!u.is_string() || u.get_ref<const std::string&>().empty())
        return c.err(p, "expected a non-empty GPU UUID string, got " + (u.is_string() ? "\"\"" : jsonType(u)));
      if (!seen.insert(u.get<std::string>()).second) return c.err(p, quoted(u.get<std::string>()) + " is listed twice");
      t.uuids.push_back(u.get<std::string>());
    }
  }
  return t;
}

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;

/// Precomputed weights among the free devices of one island (local indices).
struct Island {
  std::vector<int> members;         ///< device indices, sorted
  std::vector<std::vector<int>> w;  ///< local × local NVLink counts
};

struct SubsetScore {
  std::vector<int> local;  ///< chosen local indices, sorted
  int64_t internal = 0, cut = 0;
  int64_t score() const { return 10 * internal - cut; }
};

/// True when `a` is preferred over `b`: higher score, then the lexicographically smaller set.
bool better(const SubsetScore& a, const SubsetScore& b) {
  if (a.score() != b.score()) return a.score() > b.score();
  return a.local < b.local;
}

SubsetScore evaluate(const Island& isl, const std::vector<int>& chosen) {
  SubsetScore s;
  s.local = chosen;
  std::vector<char> in(isl.members.size(), 0);
  for (int v : chosen) in[v] = 1;
  for (int v : chosen)
    for (size_t u = 0; u < isl.members.size(); ++u) {
      if (static_cast<int>(u) == v) continue;
      if (in[u]) s.internal += isl.w[v][u];
      else s.cut += isl.w[v][u];
    }
  s.internal /= 2;  // each internal pair was counted from both ends
  return s;
}

double binomial(int n, int k) {
  double r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

constexpr double kExactLimit = 5000;

/// The best k-subset of an island (exact below kExactLimit subsets, greedy above).
SubsetScore bestSubset(const Island& isl, int k) {
  const int n = static_cast<int>(isl.members.size());
  if (k >= n) {
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    return evaluate(isl, all);
  }
  std::optional<SubsetScore> best;
  if (binomial(n, k) <= kExactLimit) {
    // Lexicographic enumeration of combinations; `better` keeps the first of equal scores.
    std::vector<int> idx(k);
    for (int i = 0; i < k; ++i) idx[i] = i;
    for (;;) {
      SubsetScore s = evaluate(isl, idx);
      if (!best || better(s, *best)) best = std::move(s);
      int i = k - 1;
      while (i >= 0 && idx[i] == n - k + i) --i;
      if (i < 0) break;
      ++idx[i];
      for (int j = i + 1; j < k; ++j) idx[j] = idx[j - 1] + 1;
    }
    return *best;
  }
  // Greedy: from each seed, add the GPU that raises 10 × internal − cut the most (lowest index on
  // ties). toChosen[u] = links from u to the chosen set; total[u] = links from u to the island.
  std::vector<int64_t> total(n, 0);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v) total[u] += isl.w[u][v];
  for (int seed = 0; seed < n; ++seed) {
    std::vector<int64_t> toChosen(n, 0);
    std::vector<char> in(n, 0);
    std::vector<int> chosen;
    auto add = [&](int v) {
      in[v] = 1;
      chosen.push_back(v);
      for (int u = 0; u < n; ++u) toChosen[u] += isl.w[u][v];
    };
    add(seed);
    while (static_cast<int>(chosen.size()) < k) {
      int pick = -1;
      int64_t pickGain = 0;
      for (int v = 0; v < n; ++v) {
        if (in[v]) continue;
        // Adding v: internal += toChosen[v]; cut loses toChosen[v] and gains its links to the rest.
        const int64_t rest = total[v] - toChosen[v];
        const int64_t gain = 10 * toChosen[v] + toChosen[v] - rest;
        if (pick < 0 || gain > pickGain) pick = v, pickGain = gain;
      }
      add(pick);
    }
    std::sort(chosen.begin(), chosen.end());
    SubsetScore s = evaluate(isl, chosen);
    if (!best || better(s, *best)) best = std::move(s);
  }
  return *best;
}

Island makeIsland(const GpuTopology& t, std::vector<int> members) {
  Island isl;
  isl.members = std::move(members);
  const size_t n = isl.members.size();
  isl.w.assign(n, std::vector<int>(n, 0));
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b) isl.w[a][b] = t.links(isl.members[a], isl.members[b]);
  return isl;
}

}  // namespace

std::string linkText(LinkKind kind, int links) {
  switch (kind) {
    case LinkKind::Self: return "X";
    case LinkKind::NvLink: return "NV" + std::to_string(links);
    case LinkKind::Pix: return "PIX";
    case LinkKind::Pxb: return "PXB";
    case LinkKind::Phb: return "PHB";
    case LinkKind::Node: return "NODE";
    case LinkKind::Sys: return "SYS";
  }
  return "?";
}

api::Result<GpuTopology> parseGpuTopology(const std::string& nodeName, const std::string& text) {
  Ctx c{"Node " + nodeName + ": annotation " + kGpuTopologyAnnotation + ": "};
  try {
    return parseImpl(c, text);
  } catch (const std::exception& e) {  // nlohmann's accessors; not expected after the type checks
    return c.err("", std::string("malformed: ") + e.what());
  }
}

api::Result<std::optional<GpuTopology>> nodeGpuTopology(const api::Node& node) {
  const std::string* v = node.meta.annotation(kGpuTopologyAnnotation);
  if (!v) return std::optional<GpuTopology>{};
  TESSERA_ASSIGN_OR_RETURN(GpuTopology t, parseGpuTopology(node.meta.name, *v));
  return std::optional<GpuTopology>{std::move(t)};
}

std::vector<std::vector<int>> nvlinkIslands(const GpuTopology& topology, const std::vector<int>& devices) {
  std::vector<int> devs;
  if (devices.empty()) {
    for (int i = 0; i < topology.gpuCount; ++i) devs.push_back(i);
  } else {
    for (int d : devices)
      if (d >= 0) devs.push_back(d);
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
  }
  const size_t n = devs.size();
  Graph g(n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b)
      if (topology.links(devs[a], devs[b]) > 0) boost::add_edge(a, b, g);
  std::vector<int> component(n);
  const int count = n == 0 ? 0 : boost::connected_components(g, component.data());
  std::vector<std::vector<int>> islands(count);
  for (size_t v = 0; v < n; ++v) islands[component[v]].push_back(devs[v]);  // devs sorted: islands sorted
  std::sort(islands.begin(), islands.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return islands;
}

std::optional<GpuChoice> chooseGpus(const GpuTopology& topology, const std::vector<int>& freeDevices, int k) {
  GpuChoice choice;
  if (k <= 0) return choice;
  size_t freeCount = 0;
  for (int d : freeDevices) freeCount += d >= 0 ? 1 : 0;
  if (freeCount < static_cast<size_t>(k)) return std::nullopt;  // (an upper bound; exact below)
  std::vector<std::vector<int>> islands = nvlinkIslands(topology, freeDevices);
  freeCount = 0;
  for (const auto& i : islands) freeCount += i.size();
  if (freeCount < static_cast<size_t>(k)) return std::nullopt;

  std::vector<char> used(islands.size(), 0);
  int need = k;
  while (need > 0) {
    // Best fit: the smallest unused island that holds the rest; equal sizes: the better subset.
    int fit = -1;
    std::optional<SubsetScore> fitScore;
    std::optional<Island> fitIsland;
    for (size_t i = 0; i < islands.size(); ++i) {
      if (used[i] || islands[i].size() < static_cast<size_t>(need)) continue;
      if (fit >= 0 && islands[i].size() > islands[fit].size()) continue;
      Island isl = makeIsland(topology, islands[i]);
      SubsetScore s = bestSubset(isl, need);
      const bool smaller = fit < 0 || islands[i].size() < islands[fit].size();
      // Equal size: higher score wins; equal score: the island seen first (lowest index) stays.
      if (smaller || s.score() > fitScore->score()) {
        fit = static_cast<int>(i);
        fitScore = std::move(s);
        fitIsland = std::move(isl);
      }
    }
    if (fit >= 0) {
      for (int local : fitScore->local) choice.devices.push_back(fitIsland->members[local]);
      choice.linkWeight += fitScore->internal;
      choice.cutWeight += fitScore->cut;
      choice.islandsUsed += 1;
      used[fit] = 1;
      break;
    }
    // Nothing holds the rest: take the largest island whole (lowest index on ties) and go on.
    int largest = -1;
    for (size_t i = 0; i < islands.size(); ++i)
      if (!used[i] && (largest < 0 || islands[i].size() > islands[largest].size())) largest = static_cast<int>(i);
    TESSERA_ASSERT(largest >= 0);
    SubsetScore whole = evaluate(makeIsland(topology, islands[largest]), [&] {
      std::vector<int> all(islands[largest].size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
      return all;
    }());
    choice.devices.insert(choice.devices.end(), islands[largest].begin(), islands[largest].end());
    choice.linkWeight += whole.internal;
    choice.islandsUsed += 1;
    used[largest] = 1;
    need -= static_cast<int>(islands[largest].size());
  }
  std::sort(choice.devices.begin(), choice.devices.end());
  choice.score = 10 * choice.linkWeight - choice.cutWeight;
  return choice;
}

}  // namespace tessera::plugins::gputopo
