// Random clusters for the victim oracle and their rendering as scenario files.
#include "victim_generate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "support/splitmix.h"

namespace tessera::oracle {
namespace {

/// The shared splitmix64 (test/support/splitmix.h), seeded the oracle's own way: its seeds are
/// named in notes and scenario files.
class Rng {
 public:
  explicit Rng(uint64_t seed) : g_{seed * 0x9E3779B97F4A7C15ull + 0x1234567ull} {}
  uint64_t next() { return g_.next(); }
  int below(int n) { return int(g_.below(n)); }
  bool chance(int percent) { return below(100) < percent; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[size_t(below(int(v.size())))];
  }

 private:
  testing::SplitMix64 g_;
};

/// What is left on each node while the generator fills it.
struct Room {
  int64_t cpu;
  int slots;
  int freeGpus;                   ///< whole devices neither used nor in a group
  std::map<int, int64_t> groups;  ///< device -> milli used
  int nextDevice = 0;
};

bool tryPlace(Case& c, std::vector<Room>& rooms, OPod& p, int node) {
  Room& r = rooms[size_t(node)];
  if (r.cpu < p.cpu || r.slots < 1) return false;
  if (p.wholeGpus > 0) {
    if (r.freeGpus < p.wholeGpus) return false;
    r.freeGpus -= p.wholeGpus;
  } else if (p.fracMilli > 0) {
    int dev = -1;
    for (auto& [d, used] : r.groups)
      if (used + p.fracMilli <= 1000 && dev < 0) dev = d;
    if (dev < 0) {
      if (r.freeGpus < 1) return false;
      r.freeGpus -= 1;
      dev = r.nextDevice++;
      r.groups[dev] = 0;
    }
    r.groups[dev] += p.fracMilli;
    p.device = dev;
  }
  r.cpu -= p.cpu, r.slots -= 1;
  p.node = node;
  (void)c;
  return true;
}

OPod randomPod(Rng& rng, bool allowFraction) {
  OPod p;
  p.cpu = 1000 * (1 + rng.below(3));
  const int k = rng.below(100);
  if (k < 50) p.wholeGpus = 1;
  else if (k < 65) p.wholeGpus = 2;
  else if (k < 85 && allowFraction) p.fracMilli = rng.chance(50) ? 500 : 250;
  else if (k < 85) p.wholeGpus = 1;
  // else: cpu only
  if (p.wholeGpus == 0 && p.fracMilli == 0) p.cpu = 1000 * (2 + rng.below(3));
  return p;
}

int64_t milliOf(int halves) { return int64_t(halves) * 500; }

std::string quantityGpu(int64_t milli) {
  if (milli < 0) return "-1";
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  char b[32];
  std::snprintf(b, sizeof b, "%lldm", static_cast<long long>(milli));
  return b;
}

/// Adds pending job `j` with `count` pods of `shape` (named NAME-k in a PodGroup, else NAME),
/// created a second apart from the job; returns its index.
int addPendingJob(Case& c, OJob j, const OPod& shape, int count) {
  const int ji = int(c.jobs.size());
  for (int k = 0; k < count; ++k) {
    OPod p = shape;
    p.job = ji;
    p.name = j.podGroup ? j.name + "-" + std::to_string(k) : j.name;
    p.created = j.created + k;
    j.pods.push_back(int(c.pods.size()));
    c.pods.push_back(p);
  }
  c.jobs.push_back(std::move(j));
  return ji;
}

/// Whether the cpu and memory all pods ask for fit in the cluster (see generate()).
bool withinCapacity(const Case& c) {
  int64_t cpu = 0, capacity = 0;
  for (const OPod& p : c.pods) cpu += p.cpu;
  for (const ONode& n : c.nodes) capacity += n.cpu;
  return cpu <= capacity && int64_t(c.pods.size()) * kPodMemory <= int64_t(c.nodes.size()) * kNodeMemory;
}

/// The decoy of victim_model.h: a job of the claimant's queue and priority, older, of another
/// shape (more pods, more GPU per pod, or cpu only), kept only when the brute force says that no
/// allowed victim set lets it fit and that it does not fit as things are, and only where the
/// claimant itself needs victims (else allocate places the claimant first and the decoy's turn
/// sees another cluster). Up to three shapes are tried; none may be kept.
void addDecoy(Case& c, Rng& rng) {
  const OJob& cl = c.jobs[size_t(c.claimant)];
  const OPod& like = c.pods[size_t(cl.pods.front())];
  for (int attempt = 0; attempt < 3; ++attempt) {
    Case t = c;
    OJob d;
    d.name = "decoy";
    d.queue = cl.queue;
    d.priority = cl.priority;
    d.created = cl.created - 600;
    int count = int(cl.pods.size());
    OPod p;
    p.cpu = like.cpu;
    p.wholeGpus = like.wholeGpus;
    p.fracMilli = like.fracMilli;
    switch (rng.below(3)) {
      case 0: count += 1 + rng.below(2); break;  // more pods of the claimant's shape
      case 1:                                    // more GPU per pod
        if (p.fracMilli > 0) p.fracMilli = 0, p.wholeGpus = 1;
        else p.wholeGpus += 1;
        break;
      default:  // cpu only
        p.wholeGpus = 0, p.fracMilli = 0, p.cpu = 1000 * rng.pick(std::vector<int>{2, 4, 8});
    }
    if (p.fracMilli > 0 && count > 2) p.fracMilli = 0, p.wholeGpus = 1;  // as the claimant's fractions
    d.podGroup = count > 1 || cl.podGroup;
    d.minMember = count;
    d.rackRequired = c.topology && d.podGroup && rng.chance(60);
    const int dj = addPendingJob(t, std::move(d), p, count);
    if (!withinCapacity(t)) continue;
    try {
      if (expectedOutcome(t).fitsWithoutVictims) return;  // the claimant does not need victims
      t.claimant = dj;
      const Expected ed = expectedOutcome(t);
      if (ed.fitsWithoutVictims || ed.solvable) continue;
    } catch (const std::exception&) {
      continue;  // a search too large
    }
    t.claimant = c.claimant;
    t.decoy = dj;
    c = std::move(t);
    return;
  }
}

std::string decimalOfMilli(int64_t milli) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", double(milli) / 1000.0);
  return b;
}

}  // namespace

std::string timeAt(int seconds) {
  char b[40];
  std::snprintf(b, sizeof b, "2025-12-31T%02d:%02d:%02dZ", seconds / 3600, (seconds / 60) % 60, seconds % 60);
  return b;
}

static Case generateOnce(uint64_t seed, uint64_t attempt) {
  Rng rng(seed * 7919 + attempt);
  Case c;
  c.seed = seed;
  c.mode = static_cast<Mode>(rng.below(3));
  c.topology = rng.chance(25);
  const int nodes = 1 + rng.below(4);
  bool anyFraction = rng.chance(35);
  for (int i = 0; i < nodes; ++i) {
    ONode n;
    n.name = "n" + std::to_string(i + 1);
    n.gpus = 1 + rng.below(4);
    n.cpu = 1000 * rng.pick(std::vector<int>{4, 8, 16});
    n.rack = c.topology ? i / 2 : -1;
    c.nodes.push_back(n);
  }
  int totalGpus = 0;
  for (const ONode& n : c.nodes) totalGpus += n.gpus;

  // Queues: quotas in half GPUs, never over-committed at any level.
  const int shape = rng.below(3);
  auto leafQuota = [&](int budgetHalves) { return budgetHalves <= 0 ? 0 : rng.below(budgetHalves + 1); };
  int budget = totalGpus * 2;
  auto addQueue = [&](const std::string& name, int parent, int quotaHalves) {
    OQueue q;
    q.name = name;
    q.parent = parent;
    q.quotaGpu = milliOf(quotaHalves);
    q.weight = 1 + rng.below(2);
    if (rng.chance(20)) q.limitGpu = q.quotaGpu + milliOf(rng.below(4));
    if (parent >= 0) c.queues[size_t(parent)].leaf = false;
    c.queues.push_back(q);
    return int(c.queues.size()) - 1;
  };
  if (shape == 2) {
    const int deptHalves = leafQuota(budget);
    const int dept = addQueue("dept", -1, deptHalves);
    int inner = deptHalves;
    const int qa = leafQuota(inner);
    inner -= qa;
    addQueue("qa", dept, qa);
    addQueue("qb", dept, leafQuota(inner));
    addQueue("qc", -1, leafQuota(budget - deptHalves));
  } else {
    const int leaves = shape == 0 ? 2 : 3;
    for (int i = 0; i < leaves; ++i) {
      const int q = leafQuota(budget);
      budget -= q;
      addQueue(std::string("q") + char('a' + i), -1, q);
    }
  }
  std::vector<int> leaves;
  for (size_t q = 0; q < c.queues.size(); ++q)
    if (c.queues[q].leaf) leaves.push_back(int(q));

  // The claimant's queue is chosen first: preempt finds its victims there, reclaim elsewhere.
  const int claimQueue = rng.pick(leaves);
  auto jobQueue = [&]() {
    if (c.mode == Mode::Preempt && rng.chance(60)) return claimQueue;
    if (c.mode == Mode::Reclaim && leaves.size() > 1 && rng.chance(85)) {
      int q = claimQueue;
      while (q == claimQueue) q = rng.pick(leaves);
      return q;
    }
    return rng.pick(leaves);
  };

  // Running jobs.
  std::vector<Room> rooms;
  for (const ONode& n : c.nodes) rooms.push_back({n.cpu, n.pods, n.gpus, {}, 0});
  const int target = 2 + rng.below(7);
  int made = 0, attempts = 0;
  while (made < target && attempts++ < 30) {
    OJob j;
    j.queue = jobQueue();
    j.priority = rng.pick(std::vector<int>{50, 50, 75, 75, 100, 125});
    const int kind = rng.below(10);
    int size = 1;
    if (kind >= 6) {
      j.podGroup = true;
      size = 2 + rng.below(2);
      j.minMember = kind >= 8 ? 1 : size;  // elastic or gang
    }
    size = std::min(size, target - made);
    if (size < j.minMember) continue;
    const OPod shapeOf = randomPod(rng, anyFraction);
    std::vector<Room> saved = rooms;
    std::vector<OPod> placed;
    for (int k = 0; k < size; ++k) {
      OPod p = shapeOf;
      bool ok = false;
      for (int t = 0; t < 6 && !ok; ++t) ok = tryPlace(c, rooms, p, rng.below(nodes));
      for (int nI = 0; nI < nodes && !ok; ++nI) ok = tryPlace(c, rooms, p, nI);
      if (!ok) break;
      placed.push_back(p);
    }
    if (int(placed.size()) < j.minMember || placed.empty()) {
      rooms = saved;
      continue;
    }
    j.name = "j" + std::to_string(c.jobs.size());
    const int ji = int(c.jobs.size());
    for (size_t k = 0; k < placed.size(); ++k) {
      placed[k].job = ji;
      placed[k].name = j.podGroup ? j.name + "-" + std::to_string(k) : j.name;
      j.pods.push_back(int(c.pods.size()));
      c.pods.push_back(placed[k]);
    }
    made += int(placed.size());
    c.jobs.push_back(j);
  }
  // Tight nodes, so that the claimant usually needs victims: what runs there, plus a little.
  for (size_t n = 0; n < c.nodes.size(); ++n) {
    ONode& node = c.nodes[n];
    const int usedGpus = node.gpus - rooms[n].freeGpus;
    const int64_t usedCpu = node.cpu - rooms[n].cpu;
    const int slack = c.mode == Mode::Consolidate ? 50 : 15;
    node.gpus = std::max(1, usedGpus + (rng.chance(slack) ? 1 : 0));
    node.cpu = std::max<int64_t>(2000, usedCpu + 1000 * rng.pick(std::vector<int>{0, 1, 2, 4}));
    rooms[n].freeGpus = node.gpus - usedGpus;
    rooms[n].cpu = node.cpu - usedCpu;
  }
  // Creation order of the jobs: a random permutation, 100 s apart; pods of a job 1 s apart.
  std::vector<int> order(c.jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(rng.below(int(i)))]);
  for (size_t k = 0; k < order.size(); ++k) {
    OJob& j = c.jobs[size_t(order[k])];
    j.created = 100 * int(k + 1);
    for (size_t i = 0; i < j.pods.size(); ++i) c.pods[size_t(j.pods[i])].created = j.created + int(i);
  }
  // A slot limit at a node's running pod count, sometimes (not with fractions: reservation pods).
  for (size_t n = 0; n < c.nodes.size(); ++n)
    if (!anyFraction && rng.chance(15)) c.nodes[n].pods = c.nodes[n].pods - rooms[n].slots + rng.below(2);

  // The claimant.
  OJob cl;
  cl.name = "claim";
  // Preempt: a queue with a preemptible job, and a priority above it. Reclaim: mostly the leaf
  // holding the fewest GPUs. Consolidate: any leaf.
  std::vector<int> lowest(c.queues.size(), 1000);
  for (const OJob& j : c.jobs) {
    if (j.preemptible()) lowest[size_t(j.queue)] = std::min(lowest[size_t(j.queue)], j.priority);
  }
  cl.queue = claimQueue;
  if (c.mode == Mode::Preempt && lowest[size_t(claimQueue)] < 1000) {
    std::vector<int> above;
    for (int v : {75, 100, 125})
      if (v > lowest[size_t(cl.queue)]) above.push_back(v);
    cl.priority = rng.pick(above);
  } else if (c.mode == Mode::Reclaim) {
    cl.priority = rng.pick(std::vector<int>{50, 75, 75, 100});
  } else {
    cl.priority = rng.pick(std::vector<int>{50, 75});
  }
  const int count = rng.chance(60) ? 1 : (rng.chance(75) ? 2 : 3);
  cl.podGroup = count > 1 || rng.chance(20);
  cl.minMember = count;
  cl.rackRequired = c.topology && cl.podGroup && rng.chance(60);
  cl.created = 23 * 3600;
  OPod cp = randomPod(rng, anyFraction && count <= 2);
  if (cp.wholeGpus == 0 && cp.fracMilli == 0 && rng.chance(60)) cp.wholeGpus = 1;  // mostly GPU claimants
  if (c.mode == Mode::Consolidate && count == 1 && cp.fracMilli == 0 && rng.chance(70)) cp.wholeGpus = 2;
  cp.cpu = 1000;
  c.claimant = addPendingJob(c, std::move(cl), cp, count);
  if (rng.chance(20)) {
    OJob h;
    h.name = "huge";
    h.queue = rng.pick(leaves);
    h.priority = 75;
    h.created = 23 * 3600 + 100;
    OPod p;
    p.cpu = 1000;
    p.wholeGpus = 8;  // more than any node has
    c.hopeless = addPendingJob(c, std::move(h), p, 1);
  }
  // Drawn last, so that the cases of earlier seeds keep their clusters.
  if (c.mode == Mode::Reclaim && rng.chance(30)) c.saturationMilli = rng.pick(std::vector<int64_t>{500, 750});
  if (rng.chance(40)) addDecoy(c, rng);
  return c;
}

Case withOneNodeRacks(Case c) {
  for (size_t i = 0; i < c.nodes.size(); ++i) c.nodes[i].rack = c.topology ? int(i) : -1;
  c.oneNodeRacks = c.topology;
  return c;
}

Case generate(uint64_t seed) {
  // A case whose cpu and memory (unlimited quotas) ask for more than the cluster has would make
  // the oracle depend on how the division caps unlimited quotas (issue 15, item 8): drawn again.
  for (uint64_t attempt = 0;; ++attempt) {
    Case c = generateOnce(seed, attempt);
    if (withinCapacity(c)) return c;
  }
}

std::string variantSuffix(const Case& c) {
  return std::string(c.oneNodeRacks ? "-one-node-racks" : "") + (c.actionAlone ? "-alone" : "");
}

std::string renderScenario(const Case& c, const Expected* e) {
  std::ostringstream y;
  const std::string variant = variantSuffix(c);
  y << "name: victim-oracle-seed-" << c.seed << variant << "\n";
  y << "description: >-\n  Victim oracle case " << c.seed << variant << " (" << modeName(c.mode)
    << "): the evictions must be the first minimal allowed set in victim order\n"
       "  (test/oracle/victim_model.h states the rules).\n";
  y << "source: test/oracle (issue 15), generated from seed " << c.seed
    << (c.oneNodeRacks ? ", every node a rack of its own" : "") << (c.actionAlone ? ", the victim action alone" : "")
    << ".\n";
  y << "config: {actions: [" << (c.actionAlone ? "" : "allocate, ") << modeName(c.mode) << "]";
  if (c.saturationMilli != 1000)
    y << ", plugins: {proportion: {reclaimerSaturationMultiplier: " << decimalOfMilli(c.saturationMilli) << "}}";
  y << "}\n";
  y << "objects:\n";
  y << "  - {apiVersion: v1, kind: Namespace, metadata: {name: t}}\n";
  for (int v : {50, 75, 100, 125})
    y << "  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: p" << v << "}, value: " << v
      << "}\n";
  for (size_t i = 0; i < c.queues.size(); ++i) {
    const OQueue& q = c.queues[i];
    y << "  - apiVersion: scheduling.tessera.dev/v1alpha1\n    kind: Queue\n    metadata: {name: " << q.name
      << ", creationTimestamp: \"2025-12-30T00:00:0" << i << "Z\"}\n    spec:\n";
    if (q.parent >= 0) y << "      parentQueue: " << c.queues[size_t(q.parent)].name << "\n";
    y << "      resources:\n        gpu: {quota: \"" << quantityGpu(q.quotaGpu) << "\", limit: \""
      << quantityGpu(q.limitGpu) << "\", overQuotaWeight: \"" << q.weight << "\"}\n"
      << "        cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
      << "        memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n";
  }
  if (c.topology)
    y << "  - apiVersion: scheduling.tessera.dev/v1alpha1\n    kind: Topology\n    metadata: {name: dc}\n"
         "    spec: {levels: [{nodeLabel: topology.example.com/rack}, {nodeLabel: kubernetes.io/hostname}]}\n";
  for (const ONode& n : c.nodes) {
    y << "  - apiVersion: v1\n    kind: Node\n    metadata:\n      name: " << n.name
      << "\n      labels: {kubernetes.io/hostname: " << n.name
      << ", nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, nvidia.com/gpu.memory: \"81920\"";
    if (n.rack >= 0) y << ", topology.example.com/rack: rack-" << n.rack;
    y << "}\n    status:\n      allocatable: {cpu: \"" << n.cpu / 1000 << "\", memory: 64Gi, pods: \"" << n.pods
      << "\", nvidia.com/gpu: \"" << n.gpus << "\"}\n      conditions: [{type: Ready, status: \"True\"}]\n";
  }
  for (const OJob& j : c.jobs) {
    if (!j.podGroup) continue;
    y << "  - apiVersion: scheduling.tessera.dev/v1alpha1\n    kind: PodGroup\n    metadata: {name: " << j.name
      << ", namespace: t, creationTimestamp: \"" << timeAt(j.created)
      << "\"}\n    spec:\n      minMember: " << j.minMember << "\n      queue: " << c.queues[size_t(j.queue)].name
      << "\n      priorityClassName: p" << j.priority << "\n";
    if (j.rackRequired)
      y << "      topologyConstraint: {topology: dc, requiredTopologyLevel: topology.example.com/rack}\n";
  }
  for (const OPod& p : c.pods) {
    const OJob& j = c.jobs[size_t(p.job)];
    y << "  - apiVersion: v1\n    kind: Pod\n    metadata:\n      name: " << p.name
      << "\n      namespace: t\n      creationTimestamp: \"" << timeAt(p.created)
      << "\"\n      labels: {tessera.dev/queue: " << c.queues[size_t(j.queue)].name;
    if (p.fracMilli > 0 && p.node >= 0)
      y << ", tessera.dev/gpu-group: " << c.nodes[size_t(p.node)].name << "-g" << p.device;
    y << "}\n";
    std::string ann;
    if (j.podGroup) ann += "pod-group-name: " + j.name;
    if (p.fracMilli > 0)
      ann += std::string(ann.empty() ? "" : ", ") + "gpu-fraction: \"" + (p.fracMilli == 500 ? "0.5" : "0.25") + "\"";
    if (!ann.empty()) y << "      annotations: {" << ann << "}\n";
    y << "    spec:\n      schedulerName: tessera\n      priorityClassName: p" << j.priority << "\n";
    if (p.node >= 0) y << "      nodeName: " << c.nodes[size_t(p.node)].name << "\n";
    y << "      containers:\n        - name: c\n          image: busybox\n          resources:\n            requests: "
         "{cpu: \""
      << p.cpu / 1000 << "\", memory: 1Gi";
    if (p.wholeGpus > 0)
      y << ", nvidia.com/gpu: \"" << p.wholeGpus << "\"}\n            limits: {nvidia.com/gpu: \"" << p.wholeGpus
        << "\"";
    y << "}\n";
    if (p.node >= 0) y << "    status: {phase: Running, startTime: \"" << timeAt(p.created) << "\"}\n";
  }
  y << "steps:\n  - cycles: 1\n";
  if (e) {
    std::vector<std::string> evicted, kept, claim, pending;  // pending: the decoy's pods (and the claimant's)
    for (size_t i = 0; i < c.pods.size(); ++i) {
      const OPod& p = c.pods[i];
      if (p.job == c.claimant) claim.push_back("t/" + p.name);
      if (p.job == c.decoy) pending.push_back("t/" + p.name);
      if (p.node < 0) continue;
      const bool victim = std::binary_search(e->victims.begin(), e->victims.end(), int(i));
      (victim ? evicted : kept).push_back("t/" + p.name);
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s = "[";
      for (const auto& x : v) s += (s.size() > 1 ? ", " : "") + x;
      return s + "]";
    };
    y << "  - expect:\n";
    if (!evicted.empty()) y << "      evicted: " << list(evicted) << "\n";
    if (!kept.empty()) y << "      notEvicted: " << list(kept) << "\n";
    if (e->fitsWithoutVictims && c.actionAlone) {
      pending.insert(pending.begin(), claim.begin(), claim.end());
    } else if (e->fitsWithoutVictims) {
      y << "      bound: {";
      for (size_t i = 0; i < claim.size(); ++i) y << (i ? ", " : "") << claim[i] << ": \"*\"";
      y << "}\n";
    } else if (e->solvable) {
      y << "      pipelined: {";
      for (size_t i = 0; i < claim.size(); ++i) y << (i ? ", " : "") << claim[i] << ": \"*\"";
      y << "}\n";
    } else {
      pending.insert(pending.begin(), claim.begin(), claim.end());
    }
    if (!pending.empty()) y << "      pending: " << list(pending) << "\n";
  }
  return y.str();
}

}  // namespace tessera::oracle
