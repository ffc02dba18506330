// The oracle's brute force: victim sequence, allowed sets, fit by exhaustive placement, and the
// first allowed fitting set in colex order (victim_model.h states the rules).
#include "victim_model.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

namespace tessera::oracle {
namespace {

using i128 = __int128;
constexpr int kGpu = plugins::proportion::kGpu, kR = plugins::proportion::kResources;

Amounts podAmounts(const OPod& p) { return {p.wholeGpus * 1000 + p.fracMilli, p.cpu, kPodMemory}; }
void add(Amounts& a, const Amounts& b, int sign = 1) {
  for (int r = 0; r < kR; ++r) a[r] += sign * b[r];
}

/// Leaf to top.
std::vector<int> pathOf(const Case& c, int q) {
  std::vector<int> p;
  for (; q >= 0; q = c.queues[q].parent) p.push_back(q);
  return p;
}

bool running(const OPod& p) { return p.node >= 0; }

/// Per queue (subtree): what its running pods hold; optionally only non-preemptible jobs.
std::vector<Amounts> allocatedBy(const Case& c, const std::vector<bool>* removed, bool npOnly = false) {
  std::vector<Amounts> a(c.queues.size(), Amounts{0, 0, 0});
  for (size_t i = 0; i < c.pods.size(); ++i) {
    const OPod& p = c.pods[i];
    if (!running(p) || (removed && (*removed)[i])) continue;
    const OJob& j = c.jobs[p.job];
    if (npOnly && j.preemptible()) continue;
    for (int q : pathOf(c, j.queue)) add(a[q], podAmounts(p));
  }
  return a;
}

/// Per queue: what its pods hold and ask for.
std::vector<Amounts> requestedBy(const Case& c) {
  std::vector<Amounts> requested = allocatedBy(c, nullptr);
  for (const OJob& j : c.jobs)
    for (int pi : j.pods)
      if (!running(c.pods[pi]))
        for (int q : pathOf(c, j.queue)) add(requested[q], podAmounts(c.pods[pi]));
  return requested;
}

std::vector<Amounts> fairShares(const Case& c) {
  std::vector<plugins::proportion::DivisionQueue> dq(c.queues.size());
  const std::vector<Amounts> requested = requestedBy(c);
  for (size_t i = 0; i < c.queues.size(); ++i) {
    const OQueue& q = c.queues[i];
    dq[i].name = q.name;
    dq[i].parent = q.parent;
    dq[i].deserved = {q.quotaGpu, -1, -1};
    dq[i].limit = {q.limitGpu, -1, -1};
    dq[i].weight = {q.weight * 1000, 1000, 1000};
    dq[i].requested = requested[i];
  }
  Amounts capacity{0, 0, 0};
  for (const ONode& n : c.nodes) add(capacity, Amounts{n.gpus * 1000, n.cpu, kNodeMemory});
  plugins::proportion::divide(dq, capacity);
  std::vector<Amounts> out;
  for (const auto& d : dq) out.push_back(d.fairShare);
  return out;
}

/// What reclaim leaves a queue: its fair share, or, where the division scaled an over-committed
/// quota down, its quota up to what it asks for (and its limit): KAI's fair share is never below
/// min(quota, requested).
std::vector<Amounts> keptShares(const Case& c, const std::vector<Amounts>& fs) {
  const std::vector<Amounts> requested = requestedBy(c);
  std::vector<Amounts> out = fs;
  for (size_t i = 0; i < c.queues.size(); ++i) {
    int64_t guaranteed = std::min(c.queues[i].quotaGpu, requested[i][0]);
    if (c.queues[i].limitGpu >= 0) guaranteed = std::min(guaranteed, c.queues[i].limitGpu);
    out[i][0] = std::max(out[i][0], guaranteed);
  }
  return out;
}

bool above(const Amounts& a, const Amounts& b) {
  for (int r = 0; r < kR; ++r)
    if (a[r] > b[r]) return true;
  return false;
}

/// Dominant share rem / fs as an exact fraction (den 0: infinite).
std::pair<i128, i128> dominant(const Amounts& rem, const Amounts& fs) {
  i128 bn = 0, bd = 1;
  for (int r = 0; r < kR; ++r) {
    if (rem[r] <= 0) continue;
    if (fs[r] <= 0) return {1, 0};
    if (i128(rem[r]) * bd > bn * fs[r]) bn = rem[r], bd = fs[r];
  }
  return {bn, bd};
}
/// >0 when a's share is larger.
int compareDominant(std::pair<i128, i128> a, std::pair<i128, i128> b) {
  if (a.second == 0 || b.second == 0) return (a.second == 0) - (b.second == 0);
  const i128 l = a.first * b.second, r = b.first * a.second;
  return l < r ? -1 : (l > r ? 1 : 0);
}

bool eligibleJob(const Case& c, int ji) {
  const OJob& j = c.jobs[ji];
  const OJob& cl = c.jobs[c.claimant];
  if (ji == c.claimant || !j.preemptible()) return false;
  bool anyRunning = false;
  for (int p : j.pods) anyRunning |= running(c.pods[p]);
  if (!anyRunning) return false;
  switch (c.mode) {
    case Mode::Preempt: return j.queue == cl.queue && j.priority < cl.priority;
    case Mode::Reclaim: return j.queue != cl.queue;
    case Mode::Consolidate: return true;
  }
  return false;
}

/// A job's chunks in its own order: surplus pods newest first, then the rest.
std::vector<Chunk> jobChunks(const Case& c, int ji) {
  const OJob& j = c.jobs[ji];
  std::vector<int> run;
  for (int p : j.pods)
    if (running(c.pods[p])) run.push_back(p);
  std::sort(run.begin(), run.end(), [&](int a, int b) { return c.pods[a].created > c.pods[b].created; });
  std::vector<Chunk> out;
  const int surplus = std::max(0, int(run.size()) - j.minMember);
  for (int k = 0; k < surplus; ++k) out.push_back({ji, {run[k]}, false});
  Chunk rest{ji, {}, true};
  rest.pods.assign(run.begin() + surplus, run.end());
  std::sort(rest.pods.begin(), rest.pods.end());
  out.push_back(rest);
  return out;
}

std::vector<Chunk> victimSequence(const Case& c, const std::vector<Amounts>& fs, const std::vector<Amounts>& kept) {
  std::map<int, std::vector<Chunk>> left;  // job -> chunks not yet in the sequence
  for (size_t j = 0; j < c.jobs.size(); ++j)
    if (eligibleJob(c, int(j))) left[int(j)] = jobChunks(c, int(j));
  std::vector<Amounts> rem = allocatedBy(c, nullptr);
  auto holds = [&](int q) {  // a candidate left in q's subtree
    for (auto& [j, ch] : left)
      if (!ch.empty())
        for (int a : pathOf(c, c.jobs[j].queue))
          if (a == q) return true;
    return false;
  };
  const std::vector<Amounts> alloc = rem;
  // The next job of a leaf, in reversed job order.
  auto nextJobIn = [&](int leaf) {
    int bj = -1;
    for (auto& [j, ch] : left) {
      if (ch.empty() || c.jobs[size_t(j)].queue != leaf) continue;
      if (bj < 0) {
        bj = j;
        continue;
      }
      const OJob &a = c.jobs[size_t(j)], &b = c.jobs[size_t(bj)];
      if (a.priority != b.priority) {
        if (a.priority < b.priority) bj = j;
        continue;
      }
      const bool sa = !ch.front().whole, sb = !left[bj].front().whole;
      if (sa != sb) {
        if (sa) bj = j;
        continue;
      }
      if (a.created > b.created) bj = j;
    }
    return bj;
  };
  // The best child of `parent` (-1: the top level) holding a candidate, in reversed queue order.
  std::function<int(int)> bestChild;
  std::function<Amounts(int)> nextAmounts = [&](int q) {  // what q's subtree would give next
    int leaf = q;
    while (!c.queues[size_t(leaf)].leaf) leaf = bestChild(leaf);
    Amounts a{0, 0, 0};
    for (int p : left[nextJobIn(leaf)].front().pods) add(a, podAmounts(c.pods[size_t(p)]));
    return a;
  };
  bestChild = [&](int parent) {
    int best = -1;
    Amounts bestAfter{0, 0, 0};
    for (size_t qi = 0; qi < c.queues.size(); ++qi) {
      const int q = int(qi);
      if (c.queues[qi].parent != parent || !holds(q)) continue;
      Amounts after = rem[qi];
      add(after, nextAmounts(q), -1);
      if (best < 0) {
        best = q, bestAfter = after;
        continue;
      }
      const size_t b = size_t(best);
      int pick = 0;  // >0: q goes before best
      const bool oq = above(alloc[qi], kept[qi]), ob = above(alloc[b], kept[b]);
      const bool sq = alloc[qi][kGpu] <= c.queues[qi].quotaGpu, sb = alloc[b][kGpu] <= c.queues[b].quotaGpu;
      if (oq != ob) pick = oq ? 1 : -1;
      else if (sq != sb) pick = sq ? -1 : 1;
      else if (int d = compareDominant(dominant(after, fs[qi]), dominant(bestAfter, fs[b]))) pick = d;
      else if (int d2 = compareDominant(dominant(alloc[qi], fs[qi]), dominant(alloc[b], fs[b]))) pick = d2;
      else pick = q > best ? 1 : -1;  // the newer queue (queues are created in index order)
      if (pick > 0) best = q, bestAfter = after;
    }
    return best;
  };
  std::vector<Chunk> seq;
  for (;;) {
    int q = bestChild(-1);
    if (q < 0) break;
    while (!c.queues[size_t(q)].leaf) q = bestChild(q);
    const int bj = nextJobIn(q);
    Chunk next = left[bj].front();
    left[bj].erase(left[bj].begin());
    for (int p : next.pods)
      for (int a : pathOf(c, c.jobs[size_t(bj)].queue)) add(rem[size_t(a)], podAmounts(c.pods[size_t(p)]), -1);
    seq.push_back(std::move(next));
  }
  return seq;
}

// ------------------------------------------------------------------ placement
struct NodeRoom {
  int64_t cpu;
  int slots;
  std::vector<int64_t> devices;  ///< milli used; 1000 = whole
};
struct Item {
  int64_t cpu;
  int whole;
  int64_t frac;
  bool claimant;
};

/// Exhaustive placement of `items` (largest first) on `rooms`; claimant items only on `allowed`.
class Packer {
 public:
  Packer(std::vector<NodeRoom> rooms, std::vector<Item> items, std::vector<bool> allowed)
      : rooms_(std::move(rooms)), items_(std::move(items)), allowed_(std::move(allowed)) {
    std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) {
      if (a.whole != b.whole) return a.whole > b.whole;
      if (a.frac != b.frac) return a.frac > b.frac;
      return a.cpu > b.cpu;
    });
  }
  /// -1: gave up (too many steps), 0: no, 1: yes.
  int run() { return place(0); }

 private:
  int place(size_t i) {
    if (i == items_.size()) return 1;
    if (++steps_ > 400000) return -1;
    const Item& it = items_[i];
    for (size_t n = 0; n < rooms_.size(); ++n) {
      if (it.claimant && !allowed_[n]) continue;
      NodeRoom& r = rooms_[n];
      if (r.cpu < it.cpu || r.slots < 1) continue;
      r.cpu -= it.cpu, r.slots -= 1;
      int res = 0;
      if (it.whole > 0) {
        std::vector<size_t> freeDev;
        for (size_t d = 0; d < r.devices.size() && int(freeDev.size()) < it.whole; ++d)
          if (r.devices[d] == 0) freeDev.push_back(d);
        if (int(freeDev.size()) == it.whole) {
          for (size_t d : freeDev) r.devices[d] = 1000;
          res = place(i + 1);
          for (size_t d : freeDev) r.devices[d] = 0;
        }
      } else if (it.frac > 0) {
        std::set<int64_t> tried;
        for (size_t d = 0; d < r.devices.size() && res == 0; ++d) {
          const int64_t u = r.devices[d];
          if (u + it.frac > 1000 || !tried.insert(u).second) continue;
          r.devices[d] += it.frac;
          res = place(i + 1);
          r.devices[d] -= it.frac;
        }
      } else {
        res = place(i + 1);
      }
      r.cpu += it.cpu, r.slots += 1;
      if (res != 0) return res;
    }
    return 0;
  }
  std::vector<NodeRoom> rooms_;
  std::vector<Item> items_;
  std::vector<bool> allowed_;
  long steps_ = 0;
};

Item itemOf(const OPod& p, bool claimant) { return {p.cpu, p.wholeGpus, p.fracMilli, claimant}; }

/// Whether the claimant (and, for consolidate, the moved pods) fit with `removed` gone.
bool nodeFit(const Case& c, const std::vector<bool>& removed) {
  std::vector<NodeRoom> rooms;
  for (const ONode& n : c.nodes) rooms.push_back({n.cpu, n.pods, std::vector<int64_t>(size_t(n.gpus), 0)});
  std::vector<std::map<int, int64_t>> groups(c.nodes.size());  // device -> used
  std::vector<int> wholeUsed(c.nodes.size(), 0);
  std::vector<Item> items;
  for (size_t i = 0; i < c.pods.size(); ++i) {
    const OPod& p = c.pods[i];
    if (!running(p)) continue;
    if (removed[i]) {
      if (c.mode == Mode::Consolidate) items.push_back(itemOf(p, false));
      continue;
    }
    NodeRoom& r = rooms[size_t(p.node)];
    r.cpu -= p.cpu, r.slots -= 1;
    if (p.fracMilli > 0) groups[size_t(p.node)][p.device] += p.fracMilli;
    wholeUsed[size_t(p.node)] += p.wholeGpus;
  }
  for (size_t n = 0; n < rooms.size(); ++n) {
    size_t d = 0;
    for (auto& [dev, used] : groups[n]) rooms[n].devices[d++] = used;
    for (int k = 0; k < wholeUsed[n]; ++k) rooms[n].devices[d++] = 1000;
  }
  const OJob& cl = c.jobs[size_t(c.claimant)];
  for (int pi : cl.pods)
    if (!running(c.pods[size_t(pi)])) items.push_back(itemOf(c.pods[size_t(pi)], true));
  std::set<int> racks;
  if (cl.rackRequired)
    for (const ONode& n : c.nodes) racks.insert(n.rack);
  else racks.insert(-2);
  for (int rack : racks) {
    std::vector<bool> allowed;
    for (const ONode& n : c.nodes) allowed.push_back(rack == -2 || (n.rack == rack && rack >= 0));
    const int r = Packer(rooms, items, allowed).run();
    if (r == 1) return true;
    if (r < 0) throw std::runtime_error("placement search too large");
  }
  return false;
}

struct SetEval {
  bool allowed = true, fits = false;
  std::string why;
};

/// The units a set takes from each job, in victim order: single pods, except that when a set
/// takes a whole job, its last minMember pods in victim order go as one unit (KAI's reclaimee
/// resources per job representative).
std::vector<std::vector<int>> unitsOf(const Case& c, const Expected& e, const std::vector<int>& positions) {
  std::map<int, int> takenOf;  // job -> pods taken
  for (int k : positions) ++takenOf[c.pods[size_t(e.order[size_t(k)])].job];
  std::map<int, std::vector<int>> rest;  // job -> its last-unit pods, collected
  std::vector<std::vector<int>> units;
  std::map<int, int> seen;
  for (int k : positions) {
    const int p = e.order[size_t(k)];
    const int j = c.pods[size_t(p)].job;
    int running = 0;
    for (int q : c.jobs[size_t(j)].pods) running += c.pods[size_t(q)].node >= 0;
    const int surplus = running - c.jobs[size_t(j)].minMember;
    if (takenOf[j] == running && seen[j]++ >= surplus) {
      if (rest[j].empty()) units.push_back({});
      rest[j].push_back(p);
      continue;
    }
    units.push_back({p});
  }
  // Fill the placeholders (one per whole job, in the order its first rest pod came).
  std::vector<std::vector<int>> out;
  std::map<int, bool> placed;
  for (int k : positions) {
    const int p = e.order[size_t(k)];
    const int j = c.pods[size_t(p)].job;
    if (rest.count(j) && std::count(rest[j].begin(), rest[j].end(), p)) {
      if (!placed[j]) out.push_back(rest[j]), placed[j] = true;
    } else {
      out.push_back({p});
    }
  }
  return out;
}

/// Queue rules and fit of a set (positions in e.order, ascending).
SetEval evaluate(const Case& c, const Expected& e, const std::vector<int>& positions) {
  SetEval out;
  std::vector<bool> removed(c.pods.size(), false);
  for (int k : positions) removed[size_t(e.order[size_t(k)])] = true;
  const OJob& cl = c.jobs[size_t(c.claimant)];
  const std::vector<int> cpath = pathOf(c, cl.queue);
  std::vector<Amounts> rem = allocatedBy(c, c.mode == Mode::Consolidate ? nullptr : &removed);
  if (c.mode == Mode::Reclaim) {
    std::vector<Amounts> run = allocatedBy(c, nullptr);
    const std::vector<Amounts> orig = run;
    for (const std::vector<int>& unit : unitsOf(c, e, positions)) {
      const std::vector<int> vpath = pathOf(c, c.jobs[size_t(c.pods[size_t(unit.front())].job)].queue);
      // The level just below the lowest common ancestor.
      std::vector<int> a(cpath.rbegin(), cpath.rend()), b(vpath.rbegin(), vpath.rend());
      size_t i = 0;
      while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
      const int qa = a[i], qb = b[i];
      const OQueue& A = c.queues[size_t(qa)];
      const OQueue& B = c.queues[size_t(qb)];
      const bool maintain = above(run[size_t(qb)], e.kept[size_t(qb)]);
      const bool guarantee = (e.request[kGpu] == 0 || orig[size_t(qa)][kGpu] + e.request[kGpu] <= A.quotaGpu) &&
                             run[size_t(qb)][kGpu] > B.quotaGpu;
      if (!maintain && !guarantee) {
        out.allowed = false;
        out.why = "queue " + B.name + " is not above its fair share (nor above its quota while " + A.name +
                  " stays within its own) when " + c.pods[size_t(unit.front())].name + " would be taken";
        return out;
      }
      // Saturation: what the claimant side holds once the whole set is gone (victims under it,
      // taken for other units, count), the claimant added.
      for (int r = 0; r < kR; ++r)
        if (e.request[r] > 0 &&
            i128(rem[size_t(qa)][r] + e.request[r]) * 1000 > i128(e.fairShare[size_t(qa)][r]) * c.saturationMilli) {
          out.allowed = false;
          out.why = "queue " + A.name + " would grow past its fair share times the saturation multiplier by taking " +
                    c.pods[size_t(unit.front())].name;
          return out;
        }
      for (int p : unit)
        for (int q : vpath) add(run[size_t(q)], podAmounts(c.pods[size_t(p)]), -1);
    }
    int tops = 0;
    for (const OQueue& q : c.queues) tops += q.parent < 0;
    for (int q : cpath) {
      if (c.queues[size_t(q)].parent < 0 && tops == 1) continue;
      bool over = false;  // only the resources the claimant asks for (as Tessera's capacity checks)
      for (int r = 0; r < kR; ++r)
        over |= e.request[r] > 0 && rem[size_t(q)][r] + e.request[r] > e.fairShare[size_t(q)][r];
      if (over) {
        out.allowed = false;
        out.why = "queue " + c.queues[size_t(q)].name + " would exceed its fair share";
        return out;
      }
    }
  }
  for (int q : cpath) {
    const OQueue& Q = c.queues[size_t(q)];
    if (e.request[kGpu] > 0 && Q.limitGpu >= 0 && rem[size_t(q)][kGpu] + e.request[kGpu] > Q.limitGpu) {
      out.why = "queue " + Q.name + " would exceed its limit";
      return out;  // allowed, but it does not fit
    }
  }
  if (!cl.preemptible() && e.request[kGpu] > 0) {
    const std::vector<Amounts> np = allocatedBy(c, nullptr, true);
    for (int q : cpath)
      if (np[size_t(q)][kGpu] + e.request[kGpu] > c.queues[size_t(q)].quotaGpu) {
        out.why = "non-preemptible work of queue " + c.queues[size_t(q)].name + " would exceed its quota";
        return out;
      }
  }
  out.fits = nodeFit(c, removed);
  if (!out.fits) out.why = "the claimant does not fit on the nodes";
  return out;
}

/// Every candidate set (positions in e.order, ascending): per job, a set of its pods that leaves
/// it at or above its minMember, or all of them.
void forEachSet(const Case& c, const Expected& e, const std::function<void(const std::vector<int>&)>& fn) {
  std::map<int, std::vector<int>> byJob;  // job -> positions
  for (size_t k = 0; k < e.order.size(); ++k) byJob[c.pods[size_t(e.order[k])].job].push_back(int(k));
  std::vector<std::vector<std::vector<int>>> options;
  for (auto& [j, ks] : byJob) {
    const int n = int(ks.size()), surplus = n - c.jobs[size_t(j)].minMember;
    std::vector<std::vector<int>> opts;
    for (int mask = 0; mask < (1 << n); ++mask) {
      const int k = __builtin_popcount(unsigned(mask));
      if (k > surplus && k != n) continue;
      std::vector<int> o;
      for (int b = 0; b < n; ++b)
        if (mask & (1 << b)) o.push_back(ks[size_t(b)]);
      opts.push_back(o);
    }
    options.push_back(opts);
  }
  std::vector<int> cur;
  std::function<void(size_t)> rec = [&](size_t j) {
    if (j == options.size()) {
      std::vector<int> s = cur;
      std::sort(s.begin(), s.end());
      fn(s);
      return;
    }
    for (const std::vector<int>& o : options[j]) {
      const size_t before = cur.size();
      cur.insert(cur.end(), o.begin(), o.end());
      rec(j + 1);
      cur.resize(before);
    }
  };
  rec(0);
}

/// Colex: the last position first.
bool colexLess(const std::vector<int>& a, const std::vector<int>& b) {
  size_t i = a.size(), j = b.size();
  while (i > 0 && j > 0) {
    --i, --j;
    if (a[i] != b[j]) return a[i] < b[j];
  }
  return i == 0 && j > 0;
}

std::vector<int> podsOf(const Expected& e, const std::vector<int>& positions) {
  std::vector<int> pods;
  for (int k : positions) pods.push_back(e.order[size_t(k)]);
  std::sort(pods.begin(), pods.end());
  return pods;
}

/// The positions of `victims`, if they form a candidate set.
bool positionsOf(const Case& c, const Expected& e, const std::vector<int>& victims, std::vector<int>& out,
                 std::string& why) {
  out.clear();
  for (int p : victims) {
    auto it = std::find(e.order.begin(), e.order.end(), p);
    if (it == e.order.end()) {
      why =
          c.pods[size_t(p)].name + " may not be a victim here (" +
          (c.jobs[size_t(c.pods[size_t(p)].job)].preemptible() ? "not a candidate of this action" : "non-preemptible") +
          ")";
      return false;
    }
    out.push_back(int(it - e.order.begin()));
  }
  std::sort(out.begin(), out.end());
  std::map<int, int> taken;
  for (int p : victims) ++taken[c.pods[size_t(p)].job];
  for (auto& [j, k] : taken) {
    int running = 0;
    for (int q : c.jobs[size_t(j)].pods) running += c.pods[size_t(q)].node >= 0;
    if (k != running && running - k < c.jobs[size_t(j)].minMember) {
      why = "job " + c.jobs[size_t(j)].name + " would keep " + std::to_string(running - k) +
            " pods, below its minMember " + std::to_string(c.jobs[size_t(j)].minMember) + " (a gang goes whole)";
      return false;
    }
  }
  return true;
}

}  // namespace

const char* modeName(Mode m) {
  switch (m) {
    case Mode::Preempt: return "preempt";
    case Mode::Reclaim: return "reclaim";
    case Mode::Consolidate: return "consolidate";
  }
  return "?";
}

Expected expectedOutcome(const Case& c) {
  Expected e;
  for (int p : c.jobs[size_t(c.claimant)].pods)
    if (!running(c.pods[size_t(p)])) add(e.request, podAmounts(c.pods[size_t(p)]));
  e.fairShare = fairShares(c);
  e.kept = keptShares(c, e.fairShare);
  e.sequence = victimSequence(c, e.fairShare, e.kept);
  for (const Chunk& ch : e.sequence) {
    std::vector<int> ps = ch.pods;
    std::sort(ps.begin(), ps.end(),
              [&](int a, int b) { return c.pods[size_t(a)].created > c.pods[size_t(b)].created; });
    e.order.insert(e.order.end(), ps.begin(), ps.end());
  }
  {
    // Without victims, allocate's rules: node fit, limits, non-preemptible quota.
    Case plain = c;
    plain.mode = Mode::Preempt;  // no fair-share rules; nothing removed
    e.fitsWithoutVictims = evaluate(plain, e, {}).fits;
  }
  if (e.fitsWithoutVictims) return e;
  bool have = false;
  std::vector<int> best;
  forEachSet(c, e, [&](const std::vector<int>& s) {
    if (s.empty() || (have && !colexLess(s, best))) return;
    const SetEval ev = evaluate(c, e, s);
    if (ev.allowed && ev.fits) have = true, best = s;
  });
  e.solvable = have;
  if (have) e.victims = podsOf(e, best);
  return e;
}

bool allowedAndFits(const Case& c, const Expected& e, const std::vector<int>& victims, std::string* why) {
  std::vector<int> positions;
  std::string w;
  if (!positionsOf(c, e, victims, positions, w)) {
    if (why) *why = w;
    return false;
  }
  if (positions.empty()) return e.fitsWithoutVictims;
  const SetEval ev = evaluate(c, e, positions);
  if (why) *why = ev.why;
  return ev.allowed && ev.fits;
}

Verdict judge(const Case& c, const Expected& e, const std::vector<int>& evicted, bool placed) {
  Verdict v;
  std::vector<int> a = evicted;
  std::sort(a.begin(), a.end());
  auto names = [&](const std::vector<int>& ps) {
    std::string s = "{";
    for (int p : ps) s += (s.size() > 1 ? ", " : "") + c.pods[size_t(p)].name;
    return s + "}";
  };
  const std::string expect = "expected " + names(e.victims) + ", evicted " + names(a);
  if (a == e.victims) {
    // Alone, a claimant that fits as things are is left to allocate (the victim action places
    // only what its victims make room for).
    const bool shouldPlace = (e.fitsWithoutVictims && !c.actionAlone) || (!e.fitsWithoutVictims && e.solvable);
    if (shouldPlace != placed) {
      v.ok = false;
      v.rule = "placement";
      v.detail = shouldPlace ? "the claimant was not placed although " +
                                   std::string(e.solvable ? "its victims were evicted" : "it fits as things are")
                 : e.fitsWithoutVictims ? "the victim action placed a claimant that fits as things are (allocate's job)"
                                        : "the claimant was placed although no allowed victim set lets it fit";
    }
    return v;
  }
  v.ok = false;
  std::vector<int> positions;
  std::string why;
  if (a.empty()) {
    v.rule = "missed";
    v.detail = "no victim taken although an allowed set lets the claimant fit; " + expect;
    return v;
  }
  if (e.fitsWithoutVictims) {
    v.rule = "(b) minimal";
    v.detail = "the claimant fits without victims; " + expect;
    return v;
  }
  if (!positionsOf(c, e, a, positions, why)) {
    v.rule = "(c) allowed";
    v.detail = why + "; " + expect;
    return v;
  }
  const SetEval ev = evaluate(c, e, positions);
  if (!ev.allowed) {
    v.rule = "(c) allowed";
    v.detail = ev.why + "; " + expect;
    return v;
  }
  if (!ev.fits) {
    v.rule = "(a) fit";
    v.detail = ev.why + "; " + expect;
    return v;
  }
  bool smaller = false;
  forEachSet(c, e, [&](const std::vector<int>& s) {
    if (smaller || s.size() >= positions.size() || s.empty()) return;
    if (!std::includes(positions.begin(), positions.end(), s.begin(), s.end())) return;
    const SetEval x = evaluate(c, e, s);
    smaller = x.allowed && x.fits;
  });
  if (smaller) {
    v.rule = "(b) minimal";
    v.detail = "a proper subset of the evicted pods already lets the claimant fit; " + expect;
    return v;
  }
  v.rule = "(d) order";
  v.detail = "a minimal set, but not the first in victim order; " + expect;
  return v;
}

}  // namespace tessera::oracle
