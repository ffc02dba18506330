// topology: topology-aware placement (KAI-Scheduler's topology plugin, Volcano's HyperNode tiers).
//
// A PodGroup's spec.topologyConstraint names a Topology and a required and/or preferred level (by
// the level's nodeLabel key). The plugin fills the session's job-domains hook: the node subsets the
// gang must be placed in, in the order allocate tries them.
//  - required level: every pod of the gang (running ones too) inside one domain of that level;
//  - preferred level: domains of the preferred level first, then each level above it, up to the
//    required level (or, without one, the whole cluster);
//  - at each level, domains that cannot hold the gang's pending pods are dropped (free plus
//    releasing resources, pods counted per node), the others go fullest first (fewest of the
//    gang's pods they can hold, then fewest free GPUs, then CPU), ties by domain id;
//  - asked by a victim action (DomainRoom::WithVictims), a domain's room is what its nodes have for
//    the scheduler's pods once running pods are evicted, so that a gang can preempt, reclaim or be
//    consolidated for on a full cluster; the search compares the victims of the domains of one
//    level (NodeDomain::rank) and takes the best;
//  - fractional pods count the room left in the nodes' shared GPUs as well as whole GPUs;
//  - a job with running pods only considers domains that contain them;
//  - inside a domain above the preferred level, a node score concentrates the pods in the
//    preferred-level sub-domain with the most room;
//  - subgroups with their own constraint get one domain of their level each, inside the group's
//    domain (assigned greedily, largest subgroup first), enforced by a predicate.
// Jobs without a constraint are left alone (no domains: null), and a session without constrained jobs
// registers nothing but the validity check.
//
// The plan for a job (its subgroup domains, the node bonus) is made when allocate asks for the
// job's domains and holds for that job only: callers place a job right after asking for its
// domains. A Topology's domain tree is built when a job first needs it, at most once per session,
// and kept for later sessions while the Topology and Node objects are unchanged (pods come and go
// without touching them); rooms are cached per domain within a session.
#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "domain_tree.h"
#include "tessera/api/validation.h"
#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

using framework::NodeDomain;
using framework::Session;
using framework::SessionJob;
using framework::SessionNode;
using framework::SessionTask;
using framework::TaskState;
using topology::DomainTree;
using topology::Overlay;
using topology::PodClass;
using topology::Room;

/// Bonus per rank of a preferred-level sub-domain: above nodeorder's scores (at most 1e6).
constexpr int64_t kRankBonus = 10'000'000;
const std::string kCluster = "cluster";

bool hasLevels(const api::TopologyConstraint& c) {
  return !c.requiredTopologyLevel.empty() || !c.preferredTopologyLevel.empty();
}

bool constrained(const api::PodGroup& pg) {
  if (hasLevels(pg.topologyConstraint)) return true;
  return std::any_of(pg.subGroups.begin(), pg.subGroups.end(),
                     [](const api::SubGroup& s) { return hasLevels(s.topologyConstraint); });
}

std::string podsText(int64_t n) { return std::to_string(n) + (n == 1 ? " pod" : " pods"); }

/// A constraint resolved against a tree: level indices, -1 when not set.
struct Levels {
  int required = -1;
  int preferred = -1;
};

/// What a set of pods (a job or a subgroup) asks for.
struct Demand {
  std::vector<PodClass> classes;  ///< pending pods by request, largest first
  int64_t pending = 0;
  int64_t needed = 0;  ///< pods that must be placed for the gang (or subgroup) minimum
  std::vector<const SessionTask*> placed;  ///< pods already on nodes (running, bound, placed this cycle)
  std::vector<int> placedNodes;            ///< their nodes, -1 when unknown
  /// Pods a domain must hold to be worth trying.
  int64_t target() const { return std::max<int64_t>(needed, 1); }
  /// The number named in reasons: "can hold 3 of 4 pods".
  int64_t shown() const { return needed > 0 ? needed : pending; }
};

/// One candidate domain: a tree domain (level >= 0) or the whole cluster (level -1).
struct Candidate {
  int level = -1;
  int domain = -1;
  Room room;
  bool holdsAll = false;
  int rank = 0;  ///< NodeDomain::rank: 0 for the first level tried, one more per level above it
};

/// Where a subgroup goes inside one group domain; level -1: anywhere in it.
struct SubAssign {
  int level = -1;
  int domain = -1;
};

/// The latest job's plan (see the file comment).
struct Plan {
  int job = -1;
  uint64_t seq = 0;  ///< which plan of the session: a job planned again may get other domains and bonuses
  DomainTree* tree = nullptr;
  int bonusLevel = -1;
  std::vector<int64_t> bonus;                  ///< per domain of bonusLevel
  std::vector<int> taskSub;                    ///< task index -> subgroup index, -1 none
  std::vector<std::string> subNames;           ///< subgroup index -> name
  std::map<std::string, std::vector<SubAssign>, std::less<>> assign;  ///< group domain name -> per subgroup
};

class TopologyPlugin final : public framework::Plugin {
 public:
  const std::string& name() const override { return name_; }

  void onSessionOpen(Session& ssn) override {
    sessionTrees_.clear();
    byCapacity_.clear();
    plan_ = Plan{};
    ssn.addJobValidFn(name_, [this, &ssn](const SessionJob& job) { return validate(ssn, job); });
    // (The session's count first: without a pending job its flag marks, no job is read. Then the
    // flag: it holds for every constrained job, and reads no PodGroup.)
    const bool any = ssn.pendingTopologyJobs() > 0 &&
                     std::any_of(ssn.jobs().begin(), ssn.jobs().end(), [](const SessionJob& j) {
                       return j.pendingCount > 0 && j.topologyConstrained && constrained(*j.info->podGroup);
                     });
    if (!any) return;  // nothing to constrain this cycle: cost nothing
    lastNode_.assign(ssn.taskCount(), -1);
    ssn.addJobDomainsFn(
        name_, [this, &ssn](const SessionJob& job, framework::DomainRoom room) { return domains(ssn, job, room); });
    ssn.addPredicateFn(name_, [this, &ssn](const SessionTask& task, const SessionNode& node, std::string& reason) {
      return subgroupFits(ssn, task, node, reason);
    });
    ssn.addNodeOrderFn(name_, [this](const SessionTask& task, const SessionNode& node) -> int64_t {
      if (task.job != plan_.job || plan_.bonusLevel < 0) return 0;
      const int d = plan_.tree->level(plan_.bonusLevel).nodeDomain[node.index];
      return d < 0 ? 0 : plan_.bonus[d];
    });
    // The planned job's subgroup domains decide which nodes pass (subgroupFits); its preferred
    // level's bonus only orders them. Both hold for one plan: planned again, the job may get others.
    // Both parts are the planned job's only (PlacementKeyJobFn: no other job is asked pod by pod).
    auto assigned = [this](int job) { return job == plan_.job && !plan_.assign.empty(); };
    auto bonused = [this](int job) { return job == plan_.job && plan_.bonusLevel >= 0; };
    ssn.addPlacementKeyFn(
        name_,
        [this, assigned](const SessionTask& task, std::string& key) {
          if (assigned(task.job)) key += std::to_string(plan_.seq);
        },
        framework::KeyPart::Verdicts, [assigned](const SessionJob& job) { return assigned(job.index); });
    ssn.addPlacementKeyFn(
        name_,
        [this, bonused](const SessionTask& task, std::string& key) {
          if (bonused(task.job)) key += "b" + std::to_string(plan_.seq);
        },
        framework::KeyPart::Order, [bonused](const SessionJob& job) { return bonused(job.index); });
    // Rooms are cached per domain; every change of a node's resources comes through here.
    ssn.addAllocateHandler(
        name_, [this, &ssn](const SessionTask& t) { changed(ssn, t, true); },
        [this, &ssn](const SessionTask& t) { changed(ssn, t, false); });
  }

 private:
  // ---- validation: field-named reasons, the gang stays pending ----

  static api::Status validate(const Session& ssn, const SessionJob& job) {
    const api::PodGroup* pg = job.info->podGroup.get();
    if (!pg || !constrained(*pg)) return api::Status::success();
    // The rules are the validation layer's (api/validation.h), shared with the PodGroup's status.
    api::PodGroupRefs refs;
    refs.topology = [&](const std::string& name) -> const api::Topology* {
      auto it = ssn.snapshot().topologies.find(name);
      return it == ssn.snapshot().topologies.end() ? nullptr : it->second.get();
    };
    if (auto p = api::validateTopologyConstraints(*pg, refs)) return api::makeError(p->text());
    return api::Status::success();
  }

  // ---- domains ----

  /// The session's tree of Topology `name`: the one kept from earlier sessions when the Topology
  /// and the Node objects are the same (only pods changed), else built anew.
  DomainTree* treeFor(const Session& ssn, const std::string& name) {
    for (DomainTree* t : sessionTrees_)
      if (t->name() == name) return t;
    auto t = ssn.snapshot().topologies.find(name);
    if (t == ssn.snapshot().topologies.end()) return nullptr;
    std::unique_ptr<DomainTree>& kept = trees_[name];
    if (kept && kept->builtFrom(t->second.get(), ssn.nodes())) kept->resetSession();
    else kept = std::make_unique<DomainTree>(t->second, ssn.nodes());
    sessionTrees_.push_back(kept.get());
    return kept.get();
  }

  static Levels levelsOf(const DomainTree& tree, const api::TopologyConstraint& c) {
    Levels l;
    if (!c.requiredTopologyLevel.empty()) l.required = tree.levelOf(c.requiredTopologyLevel);
    if (!c.preferredTopologyLevel.empty()) l.preferred = tree.levelOf(c.preferredTopologyLevel);
    return l;
  }

  /// A fractional pod on one device: its share counts in GPU groups (see PodClass::share).
  static const api::PodGpuSpec* shareOf(const SessionTask& t) {
    return t.sharesGpu() && t.info->gpuSpec->numDevices == 1 ? t.info->gpuSpec.get() : nullptr;
  }
  static bool sameShare(const api::PodGpuSpec* a, const api::PodGpuSpec* b) {
    if (!a || !b) return a == b;
    return a->fractionMilli == b->fractionMilli && a->memoryMiB == b->memoryMiB;
  }

  /// The demand of the job's tasks for which `take` holds.
  template <class Pred>
  static Demand demandOf(const Session& ssn, const SessionJob& job, int64_t minMember, Pred take) {
    Demand d;
    std::map<std::string, size_t> byKey;
    size_t last = 0;
    int64_t ready = 0;
    for (const SessionTask& t : job.tasks) {
      if (!take(t)) continue;
      if (framework::isReadyState(t.state)) ++ready;
      if (t.state == TaskState::Pending) {
        ++d.pending;
        // Gangs are mostly alike: compare with the last class before building a key.
        const api::PodGpuSpec* share = shareOf(t);
        // What the node is asked for (a MIG pod's instances, not its queue charge); a share's GPU
        // part is dropped below.
        const api::Resources& req = t.nodeRequest();
        if (!d.classes.empty() && d.classes[last].request == req && sameShare(d.classes[last].share, share)) {
          d.classes[last].count++;
          continue;
        }
        std::string key = topology::requestKey(req, share);
        auto [it, fresh] = byKey.try_emplace(key, d.classes.size());
        if (fresh) d.classes.push_back({req, 0, std::move(key), share});
        last = it->second;
        d.classes[last].count++;
      } else if (t.state == TaskState::Allocated || t.state == TaskState::Pipelined || t.state == TaskState::Bound ||
                 t.state == TaskState::Running) {
        d.placed.push_back(&t);
        d.placedNodes.push_back(t.node >= 0 ? t.node : ssn.findNode(t.info->nodeName));
      }
    }
    d.needed = std::clamp<int64_t>(minMember - ready, 0, d.pending);
    std::sort(d.classes.begin(), d.classes.end(), [](const PodClass& a, const PodClass& b) {
      const auto& x = a.request;
      const auto& y = b.request;
      if (x.milliGpu != y.milliGpu) return x.milliGpu > y.milliGpu;
      if (x.milliCpu != y.milliCpu) return x.milliCpu > y.milliCpu;
      if (x.memory != y.memory) return x.memory > y.memory;
      return a.key < b.key;
    });
    return d;
  }

  /// The room cache that serves `dem`: homogeneous demands without an overlay; else null.
  DomainTree::RoomCache* cacheFor(DomainTree& tree, const Demand& dem, const Overlay* overlay) const {
    return dem.classes.size() == 1 && !overlay ? &tree.roomCache(dem.classes.front(), basis_) : nullptr;
  }

  Room roomOf(const Session& ssn, DomainTree& tree, DomainTree::RoomCache* cache, int l, int d, const Demand& dem,
              const Overlay* overlay) const {
    if (cache) return tree.cachedRoom(*cache, l, d, dem.classes.front(), ssn.nodes(), basis_);
    return topology::roomOf(tree.level(l).domains[d].nodes, dem.classes, ssn.nodes(), overlay, nullptr, basis_);
  }

  /// Domains of level `l` inside the scope that can hold `dem`, appended to `out` in the order to
  /// try. Returns false with `why` set when the level cannot be used: the pods already placed are
  /// outside the tree or in more than one of its domains, or no domain holds the demand.
  bool candidatesAt(const Session& ssn, DomainTree& tree, int l, const Demand& dem, int scopeLevel, int scope,
                    const Overlay* overlay, int rank, std::vector<Candidate>& out, std::string& why) {
    const topology::Level& level = tree.level(l);
    int pinned = -1;
    for (size_t i = 0; i < dem.placed.size(); ++i) {
      const int n = dem.placedNodes[i];
      const int d = n < 0 ? -1 : level.nodeDomain[n];
      if (d < 0) {
        why = "running pod " + dem.placed[i]->info->key + " is on node " + dem.placed[i]->info->nodeName +
              ", which is outside Topology " + tree.name() + " (a node needs every level's label: " +
              tree.levelNames() + ")";
        return false;
      }
      if (pinned >= 0 && d != pinned) {
        why = "running pods are in more than one domain (" + level.domains[pinned].id + ", " + level.domains[d].id + ")";
        return false;
      }
      pinned = d;
    }
    std::vector<Candidate> found;
    DomainTree::RoomCache* cache = cacheFor(tree, dem, overlay);
    int best = -1;
    Room bestRoom;
    auto consider = [&](int d) {
      if (!tree.within(l, d, scopeLevel, scope)) return;
      const Room room = roomOf(ssn, tree, cache, l, d, dem, overlay);
      if (best < 0 || room.pods > bestRoom.pods) best = d, bestRoom = room;  // equal: the lower id (first) stays
      if (room.pods >= dem.target()) found.push_back({l, d, room, room.pods >= dem.pending, rank});
    };
    if (pinned >= 0) {
      consider(pinned);
    } else {
      for (size_t d = 0; d < level.domains.size(); ++d) consider(static_cast<int>(d));
    }
    if (found.empty()) {
      if (tree.nodesInTree() == 0) {
        why = "no node is in Topology " + tree.name() + " (a node needs every level's label: " + tree.levelNames() + ")";
      } else if (best < 0) {
        why = "no domain of this level";
        if (scopeLevel >= 0) why += " inside " + tree.level(scopeLevel).domains[scope].id;
      } else {
        why = "best domain " + level.domains[best].id + " can hold " + std::to_string(std::min(bestRoom.pods, dem.shown())) +
              " of " + podsText(dem.shown());
      }
      return false;
    }
    std::sort(found.begin(), found.end(), [&](const Candidate& a, const Candidate& b) {
      if (a.holdsAll != b.holdsAll) return a.holdsAll;
      if (a.room.pods != b.room.pods) return a.room.pods < b.room.pods;
      if (a.room.freeGpu != b.room.freeGpu) return a.room.freeGpu < b.room.freeGpu;
      if (a.room.freeCpu != b.room.freeCpu) return a.room.freeCpu < b.room.freeCpu;
      return level.domains[a.domain].idOrder < level.domains[b.domain].idOrder;
    });
    out.insert(out.end(), found.begin(), found.end());
    return true;
  }

  /// Candidates for a constraint inside a scope: the preferred level, each level above it, down to
  /// the required one. Levels at or above the scope's are satisfied by the scope itself. Returns
  /// false with `why` ("topology level topology.example.com/rack: ...") when the required level cannot be met.
  bool candidatesFor(const Session& ssn, DomainTree& tree, const Levels& lv, const Demand& dem, int scopeLevel,
                     int scope, const Overlay* overlay, std::vector<Candidate>& out, std::string& why) {
    const int first = lv.preferred >= 0 ? lv.preferred : lv.required;
    const int last = std::max(lv.required >= 0 ? lv.required : 0, scopeLevel + 1);
    for (int l = first; l >= last; --l) {
      std::string levelWhy;
      if (!candidatesAt(ssn, tree, l, dem, scopeLevel, scope, overlay, first - l, out, levelWhy) && l == lv.required) {
        why = "topology level " + tree.level(l).label + ": " + levelWhy;  // the key users write
        return !out.empty();  // preferred-level domains may still hold it
      }
    }
    return true;
  }

  framework::JobDomainsPtr domains(Session& ssn, const SessionJob& job, framework::DomainRoom room) {
    plan_ = Plan{};
    basis_ = room == framework::DomainRoom::Free  ? topology::Basis::Free
             : room == framework::DomainRoom::Now ? topology::Basis::Now
                                                  : topology::Basis::Capacity;
    const api::PodGroup* pg = job.info->podGroup.get();
    if (!pg || !constrained(*pg)) return nullptr;
    framework::JobDomains out;
    auto answer = [&out] { return std::make_shared<const framework::JobDomains>(std::move(out)); };
    if (auto valid = validate(ssn, job); !valid.ok()) {  // asked by an action that did not check validity
      out.reason = valid.error().message;
      return answer();
    }
    const api::TopologyConstraint& gc = pg->topologyConstraint;
    const std::string* topologyOf = &gc.topology;
    for (const auto& sg : pg->subGroups)
      if (topologyOf->empty() && hasLevels(sg.topologyConstraint)) topologyOf = &sg.topologyConstraint.topology;
    const std::string& topologyName = *topologyOf;
    DomainTree* tree = treeFor(ssn, topologyName);
    TESSERA_ASSERT(tree);  // checked by validate()
    const Levels glv = levelsOf(*tree, gc);
    const bool groupConstrained = glv.required >= 0 || glv.preferred >= 0;

    // By capacity (the victim actions' basis) a domain's room does not move within the session:
    // jobs that ask alike, none of whose pods is placed and none of whose subgroups is constrained,
    // get the same domains and the same bonuses. Each such answer is kept for the session; a job
    // like it gets it (and a plan of its own, as if it had been made for it).
    std::string* memoKey = nullptr;
    std::vector<Candidate> cands;
    if (groupConstrained) {
      const Demand dem = demandOf(ssn, job, job.minMember(), [](const SessionTask&) { return true; });
      const bool alikeByCapacity = basis_ == topology::Basis::Capacity && dem.placed.empty() &&
                                   std::none_of(pg->subGroups.begin(), pg->subGroups.end(), [](const api::SubGroup& sg) {
                                     return hasLevels(sg.topologyConstraint);
                                   });
      if (alikeByCapacity) {
        memoKey = &capacityKey_;
        capacityKey_ = topologyName;  // (its buffer is kept: appended to, no temporary per piece)
        for (int64_t v : {int64_t{glv.required}, int64_t{glv.preferred}, dem.needed, dem.pending}) {
          capacityKey_ += '|';
          capacityKey_ += std::to_string(v);
        }
        for (const PodClass& c : dem.classes) {
          capacityKey_ += '|';
          capacityKey_ += c.key;
          capacityKey_ += '#';
          capacityKey_ += std::to_string(c.count);
        }
        if (auto it = byCapacity_.find(capacityKey_); it != byCapacity_.end()) {
          const CapacityAnswer& kept = it->second;
          if (kept.planned) {
            plan_.job = job.index;
            plan_.seq = ++plans_;
            plan_.tree = tree;
            plan_.bonusLevel = kept.bonusLevel;
            plan_.bonus = kept.bonus;
          }
          return kept.domains;
        }
      }
      if (!candidatesFor(ssn, *tree, glv, dem, -1, -1, nullptr, cands, out.reason)) {
        framework::JobDomainsPtr none = answer();
        if (memoKey) byCapacity_.emplace(*memoKey, CapacityAnswer{none, false, -1, {}});
        return none;
      }
    }
    if (glv.required < 0) {  // soft only: in the end, anywhere
      Candidate anywhere;
      anywhere.rank = static_cast<int>(tree->levels().size()) + 1;
      cands.push_back(anywhere);
    }

    plan_.job = job.index;
    plan_.seq = ++plans_;
    plan_.tree = tree;
    planSubgroups(ssn, job, *pg, *tree, cands, out.reason);
    if (cands.empty()) {
      plan_ = Plan{};
      return answer();
    }
    if (glv.preferred >= 0) planBonus(ssn, job, *tree, glv, cands);

    out.domains.reserve(cands.size());
    for (const Candidate& c : cands) out.domains.push_back(toNodeDomain(ssn, *tree, c));
    framework::JobDomainsPtr found = answer();
    if (memoKey) byCapacity_.emplace(*memoKey, CapacityAnswer{found, true, plan_.bonusLevel, plan_.bonus});
    return found;
  }

  static NodeDomain toNodeDomain(const Session& ssn, const DomainTree& tree, const Candidate& c) {
    NodeDomain nd;
    if (c.level < 0) {
      nd.name = kCluster;
      nd.nodes = ssn.allNodes();
    } else {
      const topology::Domain& d = tree.level(c.level).domains[c.domain];  // the session's tree keeps it
      nd.name = d.id;
      nd.nodes = d.nodes;
    }
    nd.rank = c.rank;
    return nd;
  }

  /// Gives each constrained subgroup a domain inside each group candidate; drops the candidates
  /// where some subgroup has none (the first such failure becomes `reason` if none is left).
  void planSubgroups(const Session& ssn, const SessionJob& job, const api::PodGroup& pg, DomainTree& tree,
                     std::vector<Candidate>& cands, std::string& reason) {
    std::vector<size_t> subs;  // constrained subgroups
    for (size_t i = 0; i < pg.subGroups.size(); ++i)
      if (hasLevels(pg.subGroups[i].topologyConstraint)) subs.push_back(i);
    if (subs.empty()) return;
    for (const auto& sg : pg.subGroups) plan_.subNames.push_back(sg.name);
    plan_.taskSub.assign(job.tasks.size(), -1);
    for (const SessionTask& t : job.tasks)
      for (size_t i = 0; i < pg.subGroups.size(); ++i)
        if (t.info->subGroup == pg.subGroups[i].name) plan_.taskSub[t.index] = static_cast<int>(i);
    std::vector<Demand> demands(pg.subGroups.size());
    for (size_t i : subs)
      demands[i] = demandOf(ssn, job, pg.subGroups[i].minMember,
                            [&](const SessionTask& t) { return plan_.taskSub[t.index] == static_cast<int>(i); });
    // Largest subgroup first, then by name: the big ones are the hard ones to fit.
    std::sort(subs.begin(), subs.end(), [&](size_t a, size_t b) {
      if (demands[a].pending != demands[b].pending) return demands[a].pending > demands[b].pending;
      return pg.subGroups[a].name < pg.subGroups[b].name;
    });

    std::string firstWhy;
    std::vector<Candidate> kept;
    for (const Candidate& c : cands) {
      Overlay overlay;
      std::vector<SubAssign> assign(pg.subGroups.size());
      bool ok = true;
      for (size_t i : subs) {
        const Levels lv = levelsOf(tree, pg.subGroups[i].topologyConstraint);
        std::vector<Candidate> inner;
        std::string why;
        if (!candidatesFor(ssn, tree, lv, demands[i], c.level, c.domain, &overlay, inner, why)) {
          if (firstWhy.empty())
            firstWhy = why.substr(0, why.find(':')) + ": subgroup " + pg.subGroups[i].name + why.substr(why.find(':'));
          ok = false;
          break;
        }
        if (inner.empty()) continue;  // satisfied by the group's domain itself
        const Candidate& pick = inner.front();
        assign[i] = {pick.level, pick.domain};
        topology::roomOf(tree.level(pick.level).domains[pick.domain].nodes, demands[i].classes, ssn.nodes(), &overlay,
                         &overlay, basis_);
      }
      if (!ok) continue;
      plan_.assign[c.level < 0 ? kCluster : tree.level(c.level).domains[c.domain].id] = std::move(assign);
      kept.push_back(c);
    }
    cands = std::move(kept);
    if (cands.empty()) reason = firstWhy;
  }

  /// Ranks the preferred level's domains, most room first (those holding the job's placed pods
  /// before all), so that inside a larger domain the pods fill one sub-domain before the next.
  void planBonus(const Session& ssn, const SessionJob& job, DomainTree& tree, const Levels& lv,
                 const std::vector<Candidate>& cands) {
    const bool fallback = std::any_of(cands.begin(), cands.end(), [&](const Candidate& c) { return c.level < lv.preferred; });
    if (!fallback) return;
    const Demand dem = demandOf(ssn, job, job.minMember(), [](const SessionTask&) { return true; });
    const topology::Level& level = tree.level(lv.preferred);
    struct Ranked {
      bool holdsPlaced;
      int64_t pods;
      int d;
    };
    std::vector<Ranked> ranked;
    ranked.reserve(level.domains.size());
    std::vector<char> placedIn(level.domains.size(), 0);
    for (int n : dem.placedNodes)
      if (n >= 0 && level.nodeDomain[n] >= 0) placedIn[level.nodeDomain[n]] = 1;
    DomainTree::RoomCache* cache = cacheFor(tree, dem, nullptr);
    for (size_t d = 0; d < level.domains.size(); ++d)
      ranked.push_back({placedIn[d] != 0,
                        roomOf(ssn, tree, cache, lv.preferred, static_cast<int>(d), dem, nullptr).pods,
                        static_cast<int>(d)});
    std::sort(ranked.begin(), ranked.end(), [&](const Ranked& a, const Ranked& b) {
      if (a.holdsPlaced != b.holdsPlaced) return a.holdsPlaced;
      if (a.pods != b.pods) return a.pods > b.pods;
      return level.domains[a.d].idOrder < level.domains[b.d].idOrder;
    });
    plan_.bonusLevel = lv.preferred;
    plan_.bonus.assign(level.domains.size(), 0);
    const auto n = static_cast<int64_t>(ranked.size());
    for (int64_t r = 0; r < n; ++r) plan_.bonus[ranked[r].d] = (n - r) * kRankBonus;
  }

  bool subgroupFits(const Session& ssn, const SessionTask& task, const SessionNode& node, std::string& reason) const {
    if (task.job != plan_.job || plan_.assign.empty()) return true;
    const int sg = plan_.taskSub[task.index];
    const NodeDomain* r = ssn.restriction();
    if (sg < 0 || !r) return true;
    auto it = plan_.assign.find(r->name);
    if (it == plan_.assign.end()) return true;
    const SubAssign& a = it->second[sg];
    if (a.level < 0 || plan_.tree->level(a.level).nodeDomain[node.index] == a.domain) return true;
    reason = "outside subgroup " + plan_.subNames[sg] + "'s domain " + plan_.tree->level(a.level).domains[a.domain].id;
    return false;
  }

  void changed(const Session& ssn, const SessionTask& t, bool allocated) {
    int n = t.node;
    const size_t slot = ssn.taskSlot(t);
    if (n >= 0 && allocated) lastNode_[slot] = n;
    if (n < 0) n = lastNode_[slot];  // an undone placement: the task no longer says where it was
    if (n < 0) return;
    for (DomainTree* tree : sessionTrees_) tree->nodeChanged(n);
  }

  std::string name_ = "topology";
  /// Trees by Topology name, kept across sessions while the Topology and Node objects stay the same.
  std::map<std::string, std::unique_ptr<DomainTree>> trees_;
  std::vector<DomainTree*> sessionTrees_;  ///< the trees in use this session
  Plan plan_;
  /// The room domains are judged by in the current domains() call (DomainRoom).
  topology::Basis basis_ = topology::Basis::Free;
  uint64_t plans_ = 0;  ///< plans made (Plan::seq)
  /// domains() by capacity for jobs alike (see there), by demand, this session.
  struct CapacityAnswer {
    framework::JobDomainsPtr domains;  ///< shared with every job given it
    bool planned = false;  ///< a plan was made (else none: the job has no domain)
    int bonusLevel = -1;
    std::vector<int64_t> bonus;
  };
  std::unordered_map<std::string, CapacityAnswer> byCapacity_;
  std::string capacityKey_;  ///< domains()'s key into byCapacity_ (a kept buffer)
  std::vector<int> lastNode_;  ///< per task slot (Session::taskSlot): where it was last placed this session, -1
};

}  // namespace

PluginResult makeTopology(framework::Args&) {
  return std::shared_ptr<framework::Plugin>(std::make_shared<TopologyPlugin>());
}

}  // namespace tessera::plugins
