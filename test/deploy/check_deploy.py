#!/usr/bin/env python3
"""Offline checks of deploy/ (run by ctest; see test/deploy/CMakeLists.txt).

    check_deploy.py REPO_DIR CHECK [SHARED_SCENARIOS_DIR]

CHECK is one of:
  parse      every YAML and JSON file under deploy/ parses; every manifest has apiVersion, kind, name
             (not deploy/helm/: its templates are not YAML until helm renders them; check_helm.py)
  kustomize  `kubectl kustomize` renders deploy/ and every overlay with no deprecation warning (kubectl must be installed:
             scripts/install-deps.sh installs Debian's kubernetes-client; a missing kubectl fails);
             deploy/components/shard is rendered through deploy/overlays/shards-example
  schemas    the CRDs are structural; their openAPIV3Schema (converted to JSON Schema, unknown
             fields rejected as `kubectl apply --validate=strict` does) accepts every PodGroup, Queue,
             Topology and SchedulingShard of config/examples/, deploy/examples/ and the shared
             scenarios, rejects the shared scenarios' deliberately bad ones and a list of bad objects
  rbactable  the RBAC table of docs/install.md lists, per ServiceAccount and role, exactly what
             deploy/rbac, deploy/monitor and deploy/certs/selfsigned grant (`--print` prints the rows)
  monitoring every metric the daemon registers (src/app/run.cpp) and the planned binder, action and
             plugin histograms are on the Grafana dashboard and in docs/metrics.md; the dashboard
             queries no metric that does not exist
  workloads  the rendered Deployments and DaemonSets run non-root (but for the init container
             preparing the regions' folder and the interposer) with a read-only root filesystem,
             probes and resources; leader election, webhook, monitor and overlay settings are
             consistent; the config ConfigMap is config/tessera.yaml; RBAC has no wildcards; scheduling
             shards (deploy/overlays/shards-example): each `tessera run --shard` Deployment hardened like the scheduler,
             its SchedulingShard and Lease RBAC present, no unsharded scheduler beside shards, no two
             shards of one pool, no selector shared between workloads
Exits 1 with one line per problem.
"""
import copy
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import yaml

PROBLEMS = []
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when there: kustomize's output is large


def problem(msg):
    PROBLEMS.append(msg)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# ---------------------------------------------------------------------------------------------
# parse

def check_parse(repo):
    deploy = os.path.join(repo, "deploy")
    helm = os.path.join(deploy, "helm") + os.sep
    files = sorted(p for p in glob.glob(os.path.join(deploy, "**", "*.y*ml"), recursive=True)
                   if not p.startswith(helm))
    if not files:
        problem("no YAML files under %s" % deploy)
    for path in files:
        rel = os.path.relpath(path, repo)
        try:
            docs = load_all(path)
        except yaml.YAMLError as e:
            problem("%s: does not parse: %s" % (rel, e))
            continue
        base = os.path.basename(path)
        if os.sep + "config" + os.sep in rel:
            continue  # the scheduler's configuration (checked against config/tessera.yaml), not a manifest
        for i, d in enumerate(docs):
            if base == "kustomization.yaml":
                if not isinstance(d, dict):
                    problem("%s: not a map" % rel)
                continue
            if isinstance(d, list):  # a JSON 6902 patch
                for op in d:
                    if not isinstance(op, dict) or "op" not in op or "path" not in op:
                        problem("%s: JSON patch entry without op/path: %r" % (rel, op))
                continue
            if not isinstance(d, dict):
                problem("%s: document %d is not a map" % (rel, i))
                continue
            for key in ("apiVersion", "kind"):
                if not d.get(key):
                    problem("%s: document %d has no %s" % (rel, i, key))
            if not (d.get("metadata") or {}).get("name"):
                problem("%s: document %d (%s) has no metadata.name" % (rel, i, d.get("kind")))
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.json"), recursive=True)):  # the chart's too
        try:
            with open(path, encoding="utf-8") as f:
                json.load(f)
        except ValueError as e:
            problem("%s: does not parse: %s" % (os.path.relpath(path, repo), e))
    print("parse: %d YAML files" % len(files))


# ---------------------------------------------------------------------------------------------
# kustomize

KUSTOMIZATIONS = ["deploy", "deploy/base", "deploy/crds", "deploy/overlays/none", "deploy/overlays/hard",
                  "deploy/overlays/mps", "deploy/overlays/cert-manager", "deploy/overlays/shards-example",
                  "deploy/monitoring"]


def kubectl():
    """$KUBECTL (ctest sets it: the kubectl scripts/install-deps.sh unpacks into .tools/bin, the
    one the Helm checks use too), else the PATH's."""
    exe = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not exe:
        problem("kubectl not found: run scripts/install-deps.sh (it unpacks kubectl into .tools/bin)")
    return exe


def render(repo, rel):
    """Objects rendered by `kubectl kustomize`, or None (with a problem recorded)."""
    exe = kubectl()
    if not exe:
        return None
    r = subprocess.run([exe, "kustomize", os.path.join(repo, rel)], capture_output=True, text=True)
    if r.returncode != 0:
        problem("kubectl kustomize %s failed (exit %d): %s" % (rel, r.returncode, r.stderr.strip()[-2000:]))
        return None
    # kustomize warns about deprecated fields (bases, patchesJson6902, patchesStrategicMerge, vars,
    # commonLabels): the manifests use their replacements (resources, patches, labels).
    for line in r.stderr.splitlines():
        if "deprecated" in line.lower():
            problem("kubectl kustomize %s: %s" % (rel, line.strip()))
    try:
        return [d for d in yaml.load_all(r.stdout, Loader=LOADER) if d is not None]
    except yaml.YAMLError as e:
        problem("kubectl kustomize %s: output does not parse: %s" % (rel, e))
        return None


def check_kustomize(repo):
    for rel in KUSTOMIZATIONS:
        objs = render(repo, rel)
        if objs is None:
            continue
        if not objs:
            problem("kubectl kustomize %s rendered nothing" % rel)
        print("kustomize: %s: %d objects" % (rel, len(objs)))


# ---------------------------------------------------------------------------------------------
# schemas

CRD_DIR = os.path.join("deploy", "crds")


def crds(repo, folder=CRD_DIR):
    out = {}
    for path in sorted(glob.glob(os.path.join(repo, folder, "scheduling.tessera.dev_*.yaml"))):
        for d in load_all(path):
            out[d["spec"]["names"]["kind"]] = d
    return out


def structural_problems(node, where):
    """The rules of a structural schema that matter here (apiextensions.k8s.io/v1 refuses others)."""
    out = []
    if not isinstance(node, dict):
        return ["%s: not a map" % where]
    intstr = node.get("x-kubernetes-int-or-string")
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "type" not in node and not intstr and not preserve:
        out.append("%s: no type" % where)
    if intstr and "type" in node:
        out.append("%s: x-kubernetes-int-or-string with a type" % where)
    if "anyOf" in node and node["anyOf"] != [{"type": "integer"}, {"type": "string"}]:
        out.append("%s: anyOf other than the int-or-string pair" % where)
    if "properties" in node and "additionalProperties" in node:
        out.append("%s: properties and additionalProperties are mutually exclusive" % where)
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        item = node.get("items", {})
        for k in keys:
            if k not in item.get("required", []):
                out.append("%s: list-map key %s must be required" % (where, k))
    for k, v in (node.get("properties") or {}).items():
        out += structural_problems(v, where + "." + k)
    if isinstance(node.get("items"), dict):
        out += structural_problems(node["items"], where + "[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += structural_problems(node["additionalProperties"], where + "{}")
    return out


def to_jsonschema(node):
    """Kubernetes OpenAPI v3 schema -> JSON Schema draft 7. Objects with properties reject unknown
    fields (strict field validation) unless x-kubernetes-preserve-unknown-fields is set."""
    out = {}
    for k, v in node.items():
        if k.startswith("x-kubernetes-") or k in ("nullable", "description"):
            continue
        if k == "properties":
            out[k] = {pk: to_jsonschema(pv) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = to_jsonschema(v)
        elif k in ("anyOf", "allOf", "oneOf"):
            out[k] = [to_jsonschema(x) for x in v]
        elif k == "not":
            out[k] = to_jsonschema(v)
        else:
            out[k] = copy.deepcopy(v)
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in node and "additionalProperties" not in node and not node.get(
            "x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def list_map_problems(schema, obj, where):
    """x-kubernetes-list-type: map -> the keys are unique (JSON Schema cannot say it)."""
    out = []
    if not isinstance(schema, dict):
        return out
    if isinstance(obj, list):
        if schema.get("x-kubernetes-list-type") == "map":
            seen = set()
            for item in obj:
                if isinstance(item, dict):
                    key = tuple(item.get(k) for k in schema.get("x-kubernetes-list-map-keys", []))
                    if key in seen:
                        out.append("%s: duplicate entry %s" % (where, key))
                    seen.add(key)
        for i, item in enumerate(obj):
            out += list_map_problems(schema.get("items", {}), item, "%s[%d]" % (where, i))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            sub = (schema.get("properties") or {}).get(k)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if sub is not None:
                out += list_map_problems(sub, v, where + "." + k)
    return out


class Validator:
    def __init__(self, repo, folder=CRD_DIR):
        self.crds = crds(repo, folder)
        self.validators, self.raw = {}, {}
        for kind, crd in self.crds.items():
            versions = crd["spec"]["versions"]
            if len(versions) != 1 or versions[0]["name"] != "v1alpha1":
                problem("CRD %s: expected the single version v1alpha1" % kind)
            raw = versions[0]["schema"]["openAPIV3Schema"]
            for p in structural_problems(raw, kind):
                problem("CRD %s is not structural: %s" % (kind, p))
            self.raw[kind] = raw
            self.validators[kind] = jsonschema.Draft7Validator(to_jsonschema(raw),
                                                               format_checker=jsonschema.FormatChecker())

    def errors(self, obj):
        """Why the API server (with the CRD installed) would refuse obj; [] when it accepts it."""
        kind = obj.get("kind")
        crd = self.crds[kind]
        out = []
        if obj.get("apiVersion") != crd["spec"]["group"] + "/v1alpha1":
            out.append("apiVersion %r" % obj.get("apiVersion"))
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            out.append("metadata.name: required")
        namespaced = crd["spec"]["scope"] == "Namespaced"
        if namespaced != bool(meta.get("namespace")) and not (namespaced and "namespace" not in meta):
            out.append("metadata.namespace on a %s object" % ("namespaced" if namespaced else "cluster-scoped"))
        for e in self.validators[kind].iter_errors(obj):
            out.append("%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message))
        out += list_map_problems(self.raw[kind], obj, "")
        return out


# The kinds of deploy/crds.
TESSERA_KINDS = ("PodGroup", "Queue", "SchedulingShard", "Topology")


def tessera_objects(doc):
    """PodGroups, Queues, SchedulingShards and Topologies of a scenario file or a plain manifest."""
    found = []

    def visit(x):
        if isinstance(x, dict):
            if str(x.get("apiVersion", "")).startswith("scheduling.tessera.dev/") and x.get("kind") in TESSERA_KINDS:
                found.append(x)
                return
            for v in x.values():
                visit(v)
        elif isinstance(x, list):
            for v in x:
                visit(v)

    visit(doc)
    return found


# Objects the shared scenarios carry on purpose to prove the scheduler survives them: the schema
# must refuse each (file, kind, name) -> what the error names.
SHARED_BAD = {
    ("podgroup-min-member.yaml", "PodGroup", "zero"): "minMember",
    ("podgroup-min-member.yaml", "PodGroup", "negative"): "minMember",
    ("bad-queues.yaml", "Queue", "negative"): "quota",
}


def bad_objects():
    """(description, object, word the error must contain)."""
    def queue(gpu, **spec):
        s = {"resources": {"gpu": gpu}}
        s.update(spec)
        return {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}, "spec": s}

    def pg(spec, status=None):
        o = {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "pg", "namespace": "ns"}, "spec": spec}
        if status is not None:
            o["status"] = status
        return o

    topo = {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "Topology", "metadata": {"name": "t"}}

    def shard(spec, status=None, **meta):
        o = {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "SchedulingShard",
             "metadata": dict({"name": "s"}, **meta), "spec": spec}
        if status is not None:
            o["status"] = status
        return o
    return [
        ("PodGroup minMember 0", pg({"minMember": 0}), "minMember"),
        ("PodGroup minMember -2", pg({"minMember": -2}), "minMember"),
        ("PodGroup minMember as text", pg({"minMember": "2"}), "minMember"),
        ("PodGroup unknown preemptibility", pg({"preemptibility": "sometimes"}), "preemptibility"),
        ("PodGroup subGroup minMember 0", pg({"subGroups": [{"name": "a", "minMember": 0}]}), "minMember"),
        ("PodGroup subGroup without name", pg({"subGroups": [{"minMember": 1}]}), "name"),
        ("PodGroup duplicate subGroups", pg({"subGroups": [{"name": "a"}, {"name": "a"}]}), "duplicate"),
        ("PodGroup misspelt field", pg({"minMembers": 2}), "minMembers"),
        ("PodGroup negative running count", pg({"minMember": 1}, {"running": -1}), "running"),
        ("PodGroup condition status", pg({}, {"conditions": [{"type": "Scheduled", "status": "Yes"}]}), "status"),
        ("Queue quota -3", queue({"quota": "-3"}), "quota"),
        ("Queue quota -2 (integer)", queue({"quota": -2}), "quota"),
        ("Queue limit -0.5", queue({"limit": "-0.5"}), "limit"),
        ("Queue quota not a quantity", queue({"quota": "lots"}), "quota"),
        ("Queue negative overQuotaWeight", queue({"overQuotaWeight": "-1"}), "overQuotaWeight"),
        ("Queue quota as a float", queue({"quota": 0.5}), "quota"),
        ("Queue unknown resource", {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "Queue",
                                    "metadata": {"name": "q"},
                                    "spec": {"resources": {"nvidia.com/gpu": {"quota": "1"}}}}, "nvidia.com/gpu"),
        ("Queue unknown key", queue({"quota": "1", "max": "2"}), "max"),
        ("Queue priority as text", queue({"quota": "1"}, priority="high"), "priority"),
        ("Queue bad preemptMinRuntime", queue({"quota": "1"}, preemptMinRuntime="ten minutes"), "preemptMinRuntime"),
        ("Queue negative reclaimMinRuntime", queue({"quota": "1"}, reclaimMinRuntime="-5m"), "reclaimMinRuntime"),
        ("Topology without levels", dict(topo, spec={"levels": []}), "levels"),
        ("Topology level without nodeLabel", dict(topo, spec={"levels": [{}]}), "nodeLabel"),
        ("Topology without spec", topo, "spec"),
        ("SchedulingShard nodePool as a number", shard({"nodePool": 7}), "nodePool"),
        ("SchedulingShard config as text", shard({"config": "schedulePeriod: 2s"}), "config"),
        ("SchedulingShard misspelt field", shard({"pool": "a100"}), "pool"),
        ("SchedulingShard pending count as text", shard({}, {"pendingPods": "many"}), "pendingPods"),
        ("SchedulingShard with a namespace", shard({}, namespace="ns"), "namespace"),
    ]


GOOD_OBJECTS = [
    {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "Queue", "metadata": {"name": "edge"},
     "spec": {"priority": 7, "resources": {"gpu": {"quota": 4, "limit": -1, "overQuotaWeight": "0.5"},
                                           "cpu": {"quota": "500m", "limit": "64"},
                                           "memory": {"quota": "256Gi", "limit": "1e12"}},
              "preemptMinRuntime": "1h30m", "reclaimMinRuntime": "0"},
     "status": {"allocated": {"nvidia.com/gpu": "2500m", "cpu": 3}, "requested": {"memory": "16Gi"},
                "fairShare": {"nvidia.com/gpu": "4"}, "deserved": {"nvidia.com/gpu": "4"},
                "conditions": [{"type": "Valid", "status": "True", "reason": "OK", "message": "",
                                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 3}]}},
    {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "PodGroup",
     "metadata": {"name": "edge", "namespace": "ns"},
     "spec": {"minMember": 3, "queue": "q", "priorityClassName": "train", "preemptibility": "non-preemptible",
              "topologyConstraint": {"topology": "t", "requiredTopologyLevel": "rack"},
              "subGroups": [{"name": "a", "minMember": 2, "topologyConstraint": {"preferredTopologyLevel": "h"}},
                            {"name": "b"}]},
     "status": {"phase": "Running", "running": 3, "pending": 0, "succeeded": 0, "failed": 0, "scheduled": 3,
                "conditions": [{"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "lastScheduleTime": "2026-01-01T00:00:00Z"}},
    {"apiVersion": "scheduling.tessera.dev/v1alpha1", "kind": "SchedulingShard", "metadata": {"name": "h100"},
     "spec": {"nodePool": "h100", "config": {"schedulePeriod": "2s", "plugins": {"nodeorder": {"node": "spread"}}}},
     "status": {"nodes": 32, "queues": 4, "pendingPods": 0, "leader": "tessera-scheduler-shard-h100-0",
                "lastUpdateTime": "2026-01-01T00:00:00Z"}},
]


def check_schemas(repo, shared, folder=CRD_DIR):
    """The CRDs in folder (deploy/crds, or the Helm chart's crds/) against good and bad objects."""
    v = Validator(repo, folder)
    if set(v.crds) != set(TESSERA_KINDS):
        problem("%s: expected the CRDs %s, found %s" % (folder, ", ".join(TESSERA_KINDS), sorted(v.crds)))
        return
    files = sorted(glob.glob(os.path.join(repo, "config", "examples", "*.yaml")))
    files += sorted(glob.glob(os.path.join(repo, "deploy", "examples", "*.yaml")))
    if shared:
        files += sorted(glob.glob(os.path.join(shared, "**", "*.yaml"), recursive=True))
    accepted = rejected = 0
    for path in files:
        base = os.path.basename(path)
        for doc in load_all(path):
            for obj in tessera_objects(doc):
                name = (obj.get("metadata") or {}).get("name")
                errs = v.errors(obj)
                want = SHARED_BAD.get((base, obj.get("kind"), name))
                if want is None and errs:
                    problem("%s: %s %s refused: %s" % (path, obj["kind"], name, "; ".join(errs)))
                elif want is not None and not errs:
                    problem("%s: %s %s accepted, but it is invalid (%s)" % (path, obj["kind"], name, want))
                elif want is not None and not any(want in e for e in errs):
                    problem("%s: %s %s refused without naming %s: %s" % (path, obj["kind"], name, want, errs))
                if errs:
                    rejected += 1
                else:
                    accepted += 1
    for obj in GOOD_OBJECTS:
        for e in v.errors(obj):
            problem("valid %s %s refused: %s" % (obj["kind"], obj["metadata"]["name"], e))
    for what, obj, word in bad_objects():
        errs = v.errors(obj)
        if not errs:
            problem("%s: accepted" % what)
        elif not any(word in e for e in errs):
            problem("%s: refused without naming %s: %s" % (what, word, errs))
    print("schemas: %s: %d objects accepted, %d refused as expected; %d bad objects refused; shared scenarios %s"
          % (folder, accepted, rejected, len(bad_objects()), shared or "not given"))


# ---------------------------------------------------------------------------------------------
# workloads

def find(objs, kind, name):
    for o in objs:
        if o.get("kind") == kind and o["metadata"]["name"] == name:
            return o
    return None


def flag(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def check_pod_security(where, pod, allow_root=False, root_init=()):
    """Every container and init container hardened; non-root unless allow_root (all of them) or
    named in root_init (init containers that must write a root-owned host folder)."""
    sc = pod.get("securityContext") or {}
    init = [(c, "init container") for c in pod.get("initContainers", [])]
    for c, what in [(c, "container") for c in pod.get("containers", [])] + init:
        csc = c.get("securityContext") or {}
        cname = "%s %s %s" % (where, what, c["name"])
        if not allow_root and not (what == "init container" and c["name"] in root_init):
            if not (csc.get("runAsNonRoot", sc.get("runAsNonRoot")) is True):
                problem("%s: runAsNonRoot is not true" % cname)
            uid = csc.get("runAsUser", sc.get("runAsUser"))
            if uid in (None, 0):
                problem("%s: runAsUser must be a non-zero uid (the image's user is numeric 65532)" % cname)
        if csc.get("readOnlyRootFilesystem") is not True:
            problem("%s: readOnlyRootFilesystem is not true" % cname)
        if csc.get("allowPrivilegeEscalation") is not False:
            problem("%s: allowPrivilegeEscalation is not false" % cname)
        if "ALL" not in ((csc.get("capabilities") or {}).get("drop") or []):
            problem("%s: capabilities are not all dropped" % cname)
        res = c.get("resources") or {}
        if not res.get("requests") or not (res.get("limits") or {}).get("memory"):
            problem("%s: needs resource requests and a memory limit" % cname)


def port_number(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    problem("container %s: no port named %s" % (container["name"], port))
    return None


class Expect:
    """What check_rendered expects of a rendering beyond the rules every rendering follows. The
    defaults are those of deploy/ and of the Helm chart's default values."""

    def __init__(self, **kw):
        self.scheduler_replicas = 2
        self.scheduler_name = "tessera"  # what the webhooks' matchConditions compare spec.schedulerName with
        self.failure_policies = {"MutatingWebhookConfiguration": "Fail", "ValidatingWebhookConfiguration": "Ignore"}
        self.excluded_namespaces = ("kube-system", "tessera-system", "tessera-reservation")
        # (ConfigMap text, repo) -> whether it is the configuration wanted: deploy/'s is a copy of
        # config/tessera.yaml, byte for byte.
        self.config = lambda text, repo: text == read(os.path.join(repo, "config", "tessera.yaml"))
        self.config_wanted = "config/tessera.yaml (copy it to deploy/scheduler/config/tessera.yaml)"
        # hard: where pods get the interposer (the webhook's --interposer-source; the chart's
        # interposer.source), and the kubelet's pods folder the monitor reads their regions in.
        self.interposer_source = "init-container"
        self.kubelet_pods_dir = "/var/lib/kubelet/pods"
        for k, v in kw.items():
            if not hasattr(self, k):
                raise TypeError("Expect: no field %s" % k)
            setattr(self, k, v)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def check_rendered(repo, rel, objs, backend, expect=None):
    """Problems of one rendering of deploy/ (an overlay) or of the Helm chart, as `where`."""
    expect = expect or Expect()
    where = rel
    sched = find(objs, "Deployment", "tessera-scheduler")
    if not sched:
        return problem("%s: no Deployment tessera-scheduler" % where)
    spec = sched["spec"]
    pod = spec["template"]["spec"]
    if spec.get("replicas") != expect.scheduler_replicas:
        problem("%s: scheduler replicas %r, want %d" % (where, spec.get("replicas"), expect.scheduler_replicas))
    check_pod_security(where + " scheduler", pod)
    c = pod["containers"][0]
    args = c.get("args", [])
    if args[:1] != ["run"] or "--in-cluster" not in args:
        problem("%s: scheduler args must start with `run --in-cluster`: %s" % (where, args))
    if flag(args, "--leader-elect") != "true" and spec.get("replicas", 1) > 1:
        problem("%s: scheduler needs --leader-elect=true with %d replicas" % (where, spec["replicas"]))
    lease_ns = flag(args, "--lease-namespace")
    if lease_ns != sched["metadata"]["namespace"]:
        problem("%s: --lease-namespace %r differs from the Deployment's namespace" % (where, lease_ns))
    lease_role = find(objs, "Role", "tessera-scheduler-leader-election")
    if not lease_role or lease_role["metadata"]["namespace"] != lease_ns:
        problem("%s: no leader-election Role in the lease namespace %s" % (where, lease_ns))
    elif not any(flag(args, "--lease-name") in (r.get("resourceNames") or []) for r in lease_role["rules"]):
        problem("%s: the leader-election Role does not name the Lease %s" % (where, flag(args, "--lease-name")))
    health = int(flag(args, "--health-port") or 10259)
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        p = (c.get(probe) or {}).get("httpGet")
        if not p or p.get("path") != path or port_number(c, p.get("port")) != health:
            problem("%s: scheduler %s must GET %s on the health port %d: %s" % (where, probe, path, health, p))
    config = flag(args, "--config")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    cm_name = (vols.get(mounts.get(os.path.dirname(config or "")), {}).get("configMap") or {}).get("name")
    cm = find(objs, "ConfigMap", cm_name) if cm_name else None
    if not cm:
        problem("%s: --config %s is not mounted from a ConfigMap" % (where, config))
    else:
        if not expect.config(cm["data"].get(os.path.basename(config)), repo):
            problem("%s: ConfigMap %s differs from %s" % (where, cm_name, expect.config_wanted))
    sa = pod.get("serviceAccountName")
    binding = find(objs, "ClusterRoleBinding", "tessera-scheduler")
    if not binding or {"kind": "ServiceAccount", "name": sa, "namespace": lease_ns} not in binding["subjects"]:
        problem("%s: the ClusterRoleBinding tessera-scheduler does not bind the ServiceAccount %s" % (where, sa))

    wh = find(objs, "Deployment", "tessera-webhook")
    if not wh:
        return problem("%s: no Deployment tessera-webhook" % where)
    wpod = wh["spec"]["template"]["spec"]
    check_pod_security(where + " webhook", wpod)
    wargs = wpod["containers"][0].get("args", [])
    if wargs[:1] != ["webhook"] or not flag(wargs, "--tls-cert-file") or not flag(wargs, "--tls-key-file"):
        problem("%s: webhook args must be `webhook --tls-cert-file=... --tls-key-file=...`: %s" % (where, wargs))
    if flag(wargs, "--isolation") != backend:
        problem("%s: webhook --isolation=%s, want %s" % (where, flag(wargs, "--isolation"), backend))
    # The scheduler knows the backend: under hard it refuses fractional pods the webhook did not wire.
    if flag(args, "--isolation") != backend:
        problem("%s: scheduler --isolation=%s, want %s (the webhook's)" % (where, flag(args, "--isolation"), backend))
    port = int(flag(wargs, "--port") or 0)
    svc = find(objs, "Service", "tessera-webhook")
    if port != 9443 or not svc or port_number(wpod["containers"][0], svc["spec"]["ports"][0]["targetPort"]) != 9443:
        problem("%s: the webhook must listen on 9443 behind the Service tessera-webhook" % where)
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        policy = expect.failure_policies[kind]
        cfg = find(objs, kind, "tessera-webhook")
        if not cfg:
            problem("%s: no %s tessera-webhook" % (where, kind))
            continue
        for hook in cfg["webhooks"]:
            s = hook["clientConfig"]["service"]
            if (s["name"], s["namespace"], s.get("path"), s.get("port", 443)) != (
                    "tessera-webhook", wh["metadata"]["namespace"], path, 443):
                problem("%s: %s calls %s" % (where, kind, s))
            if hook.get("failurePolicy") != policy:
                problem("%s: %s failurePolicy %s, want %s (docs/install.md)" % (where, kind,
                                                                               hook.get("failurePolicy"), policy))
            # Scoped to Tessera's pods, so that a webhook outage cannot block any other pod creation.
            conditions = [c.get("expression", "") for c in hook.get("matchConditions") or []]
            scheduler = "object.spec.schedulerName == '%s'" % expect.scheduler_name
            if scheduler not in conditions and not hook.get("objectSelector"):
                problem("%s: %s is not scoped to Tessera pods (matchConditions %s, or an objectSelector; "
                        "docs/install.md)" % (where, kind, scheduler))
            excluded = set()
            for e in (hook.get("namespaceSelector") or {}).get("matchExpressions", []):
                if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn":
                    excluded |= set(e["values"])
            for ns in expect.excluded_namespaces:
                if ns not in excluded:
                    problem("%s: %s does not exclude namespace %s" % (where, kind, ns))

    ds = find(objs, "DaemonSet", "tessera-interposer")
    if backend == "hard" and not ds:
        problem("%s: the hard backend needs the interposer DaemonSet" % where)
    if backend != "hard" and ds:
        problem("%s: backend %s should not install the interposer" % (where, backend))
    host_path = expect.interposer_source == "host-path"
    if backend == "hard" and flag(wargs, "--interposer-source") not in ((None, "init-container") if not host_path
                                                                        else ("host-path",)):
        problem("%s: webhook --interposer-source=%s, want %s" % (where, flag(wargs, "--interposer-source"),
                                                                  expect.interposer_source))
    if ds:
        dpod = ds["spec"]["template"]["spec"]
        if (dpod.get("nodeSelector") or {}).get("nvidia.com/gpu.present") != "true":
            problem("%s: interposer DaemonSet must select nvidia.com/gpu.present=true nodes" % where)
        paths = [v["hostPath"]["path"] for v in dpod.get("volumes", []) if "hostPath" in v]
        if host_path:
            # The layout before issue 18, item 7: it installs the library onto the node, as root.
            if paths != ["/usr/local/tessera/lib"]:
                problem("%s: interposer hostPath %s, want /usr/local/tessera/lib" % (where, paths))
            check_pod_security(where + " interposer", dpod, allow_root=True)
        else:
            # It only keeps the image on the node: non-root, nothing of the node mounted; and the
            # webhook's init container copies the library from this very image.
            if paths:
                problem("%s: interposer DaemonSet mounts %s of the node: with --interposer-source=init-container "
                        "it needs nothing of it" % (where, paths))
            check_pod_security(where + " interposer", dpod)
            image = dpod["containers"][0]["image"]
            wenv = {e["name"]: e.get("value") for e in wpod["containers"][0].get("env", [])}
            given = flag(wargs, "--interposer-image") or wenv.get("TESSERA_INTERPOSER_IMAGE")
            if given != image:
                problem("%s: the webhook's interposer image (--interposer-image, else $TESSERA_INTERPOSER_IMAGE) is %s, "
                        "want the interposer DaemonSet's image %s" % (where, given, image))

    check_monitor(where, objs, backend, expect)

    for o in objs:
        pod = o.get("spec", {}).get("template", {}).get("spec", {}) or {}
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            if ":" not in c["image"].rsplit("/", 1)[-1]:
                problem("%s: %s %s: image %s has no tag (set it in the overlay's images:)"
                        % (where, o["kind"], o["metadata"]["name"], c["image"]))
        if o["kind"] in ("Role", "ClusterRole"):
            for r in o.get("rules", []):
                for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                    if "*" in (r.get(key) or []):
                        problem("%s: %s %s uses a wildcard in %s" % (where, o["kind"], o["metadata"]["name"], key))
        if o["kind"] == "Service":
            sel = o["spec"].get("selector") or {}
            if not any(w["kind"] in ("Deployment", "DaemonSet") and
                       sel.items() <= w["spec"]["template"]["metadata"]["labels"].items() for w in objs):
                problem("%s: Service %s selects no workload" % (where, o["metadata"]["name"]))

    check_shards(where, objs, backend)


def check_shards(where, objs, backend):
    """Scheduling shards (docs/sharding.md, deploy/components/shard): every Deployment running
    `tessera run --shard=NAME` is hardened like tessera-scheduler, knows the backend, has its
    SchedulingShard and the RBAC of its Lease; no unsharded scheduler runs beside shards (it would
    schedule every pool too); one pool, one shard; no workload's selector (Deployment, PDB) picks
    another workload's pods."""
    workloads = [o for o in objs if o.get("kind") in ("Deployment", "DaemonSet")]
    for o in workloads + [o for o in objs if o.get("kind") == "PodDisruptionBudget"]:
        sel = (o["spec"].get("selector") or {}).get("matchLabels") or {}
        picked = [w["metadata"]["name"] for w in workloads
                  if sel and sel.items() <= (w["spec"]["template"]["metadata"].get("labels") or {}).items()]
        if o.get("kind") != "PodDisruptionBudget":
            picked = [n for n in picked if n != o["metadata"]["name"]]
            if picked:
                problem("%s: the selector of %s %s also picks the pods of %s" % (where, o["kind"], o["metadata"]["name"],
                                                                                  ", ".join(picked)))
        elif len(picked) > 1:
            problem("%s: PodDisruptionBudget %s picks the pods of %s" % (where, o["metadata"]["name"], ", ".join(picked)))
    shards = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "SchedulingShard"}
    pools = {}
    for name, s in sorted(shards.items()):
        pool = (s.get("spec") or {}).get("nodePool") or ""
        if pool in pools:
            problem("%s: SchedulingShards %s and %s both schedule node pool %r: one pool, one shard (both refuse to start)"
                    % (where, pools[pool], name, pool))
        pools.setdefault(pool, name)
    runs = [o for o in objs if o.get("kind") == "Deployment" and
            (o["spec"]["template"]["spec"]["containers"][0].get("args") or [])[:1] == ["run"]]
    sharded = [d for d in runs if flag(d["spec"]["template"]["spec"]["containers"][0].get("args") or [], "--shard")]
    served = {}
    for d in runs:
        name, spec = d["metadata"]["name"], d["spec"]
        pod = spec["template"]["spec"]
        c = pod["containers"][0]
        args = c.get("args") or []
        shard = flag(args, "--shard")
        if not shard:
            if sharded:
                problem("%s: Deployment %s runs `tessera run` without --shard beside the shards %s: it would schedule "
                        "their pools too" % (where, name, ", ".join(d2["metadata"]["name"] for d2 in sharded)))
            continue
        if shard not in shards:
            problem("%s: Deployment %s runs --shard=%s, but there is no SchedulingShard %s (it refuses to start)"
                    % (where, name, shard, shard))
        if shard in served:
            problem("%s: Deployments %s and %s both run shard %s" % (where, served[shard], name, shard))
        served[shard] = name
        if name == "tessera-scheduler":
            continue  # check_rendered checked it
        check_pod_security("%s %s" % (where, name), pod)
        if args[:2] != ["run", "--in-cluster"]:
            problem("%s: %s args must start with `run --in-cluster`: %s" % (where, name, args))
        if flag(args, "--isolation") != backend:
            problem("%s: %s --isolation=%s, want %s (the webhook's)" % (where, name, flag(args, "--isolation"), backend))
        if flag(args, "--leader-elect") != "true" and spec.get("replicas", 1) > 1:
            problem("%s: %s needs --leader-elect=true with %d replicas" % (where, name, spec["replicas"]))
        lease = flag(args, "--lease-name") or "tessera-" + shard  # the daemon's default with --shard
        lease_ns = flag(args, "--lease-namespace")
        sa = {"kind": "ServiceAccount", "name": pod.get("serviceAccountName"), "namespace": d["metadata"]["namespace"]}
        in_ns = [o for o in objs if o["metadata"].get("namespace") == lease_ns]
        granted = set()
        for b in in_ns:
            if b.get("kind") != "RoleBinding" or sa not in b.get("subjects", []):
                continue
            role = find(in_ns, "Role", b["roleRef"]["name"])
            for r in (role or {}).get("rules", []):
                if "leases" in r.get("resources", []) and lease in (r.get("resourceNames") or []):
                    granted |= set(r.get("verbs", []))
        if not {"get", "update"} <= granted:
            problem("%s: %s: no Role in %s lets its ServiceAccount get and update the Lease %s" % (where, name, lease_ns,
                                                                                                  lease))
        health = int(flag(args, "--health-port") or 10259)
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            p = (c.get(probe) or {}).get("httpGet")
            if not p or p.get("path") != path or port_number(c, p.get("port")) != health:
                problem("%s: %s %s must GET %s on the health port %d: %s" % (where, name, probe, path, health, p))
        config = flag(args, "--config")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        cm_name = (vols.get(mounts.get(os.path.dirname(config or "")), {}).get("configMap") or {}).get("name")
        if not cm_name or not find(objs, "ConfigMap", cm_name):
            problem("%s: %s: --config %s is not mounted from a ConfigMap of this rendering (%s)" % (where, name, config,
                                                                                                   cm_name))
        pod_labels = spec["template"]["metadata"]["labels"].items()
        if not any(o.get("kind") == "PodDisruptionBudget" and
                   ((o["spec"].get("selector") or {}).get("matchLabels") or {}).items() <= pod_labels for o in objs):
            problem("%s: %s has no PodDisruptionBudget" % (where, name))
    for name in sorted(set(shards) - set(served)):
        if sharded:
            problem("%s: SchedulingShard %s: no Deployment runs --shard=%s, so its pool is not scheduled"
                    % (where, name, name))


def check_monitor(where, objs, backend, expect):
    """tessera monitor (deploy/monitor): with the hard backend only; non-root (but, with
    --interposer-source=host-path, for the init container preparing /var/lib/tessera/regions); the
    kubelet's pods folder read-only; its RBAC, probes, Service and ServiceMonitor."""
    ds = find(objs, "DaemonSet", "tessera-monitor")
    if backend == "hard" and not ds:
        return problem("%s: the hard backend needs the tessera-monitor DaemonSet (it prepares the regions' folder)" % where)
    if backend != "hard" and ds:
        problem("%s: backend %s should not install tessera-monitor" % (where, backend))
    if not ds:
        return
    pod = ds["spec"]["template"]["spec"]
    if (pod.get("nodeSelector") or {}).get("nvidia.com/gpu.present") != "true":
        problem("%s: tessera-monitor must select nvidia.com/gpu.present=true nodes" % where)
    vols = {v["name"]: v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v}
    want = {"pods": expect.kubelet_pods_dir, "regions": "/var/lib/tessera/regions"}
    if vols != want:
        problem("%s: tessera-monitor hostPaths %s, want %s" % (where, vols, want))
    host_path = backend == "hard" and expect.interposer_source == "host-path"
    init = [c["name"] for c in pod.get("initContainers", [])]
    if init != (["prepare-regions"] if host_path else []):
        problem("%s: tessera-monitor init containers %s: prepare-regions (root) with --interposer-source=host-path "
                "only" % (where, init))
    check_pod_security(where + " monitor", pod, root_init=("prepare-regions",))
    c = pod["containers"][0]
    args = c.get("args", [])
    port = int(flag(args, "--port") or 9402)
    if (args[:1] != ["monitor"] or flag(args, "--region-dir") != "/var/lib/tessera/regions"
            or flag(args, "--kubelet-pods-dir") != expect.kubelet_pods_dir):
        problem("%s: monitor args must be `monitor --kubelet-pods-dir=%s --region-dir=/var/lib/tessera/regions ...`: %s"
                % (where, expect.kubelet_pods_dir, args))
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    if not (mounts.get("pods") or {}).get("readOnly") or (mounts.get("pods") or {}).get("mountPath") != expect.kubelet_pods_dir:
        problem("%s: the monitor must mount the kubelet's pods folder read-only at %s" % (where, expect.kubelet_pods_dir))
    if 0 not in ((pod.get("securityContext") or {}).get("supplementalGroups") or []):
        problem("%s: the monitor needs group 0 (supplementalGroups) to read the kubelet's 0750 pod folders" % where)
    for probe in ("livenessProbe", "readinessProbe"):
        p = (c.get(probe) or {}).get("httpGet")
        if not p or p.get("path") != "/healthz" or port_number(c, p.get("port")) != port:
            problem("%s: monitor %s must GET /healthz on --port %d: %s" % (where, probe, port, p))
    if "--in-cluster" in args:
        env = {e["name"]: e for e in c.get("env", [])}
        if (((env.get("NODE_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") != "spec.nodeName":
            problem("%s: monitor --in-cluster needs NODE_NAME from spec.nodeName" % where)
        binding = find(objs, "ClusterRoleBinding", "tessera-monitor")
        sa = {"kind": "ServiceAccount", "name": pod.get("serviceAccountName"), "namespace": ds["metadata"]["namespace"]}
        if not binding or sa not in binding["subjects"]:
            problem("%s: the ClusterRoleBinding tessera-monitor does not bind the monitor's ServiceAccount" % where)
    svc = find(objs, "Service", "tessera-monitor")
    if not svc or port_number(c, svc["spec"]["ports"][0]["targetPort"]) != port:
        problem("%s: the Service tessera-monitor must reach the monitor's --port %d" % (where, port))
    sm = find(objs, "ServiceMonitor", "tessera-monitor")
    if svc and sm:
        if not sm["spec"]["selector"]["matchLabels"].items() <= (svc["metadata"].get("labels") or {}).items():
            problem("%s: the ServiceMonitor tessera-monitor does not select the Service tessera-monitor" % where)
        if not sm["spec"]["endpoints"][0].get("honorLabels"):
            problem("%s: the ServiceMonitor tessera-monitor must honor the monitor's pod/namespace labels" % where)


def check_hostpath_patch(repo):
    """docs/install.md, "Interposer from the node": its patches, added to a copy of overlays/hard,
    render the hostPath layout (--interposer-source=host-path, the library installed onto the node,
    the monitor's root init container) and nothing else differs from what the checks expect."""
    with open(os.path.join(repo, "docs", "install.md"), encoding="utf-8") as f:
        doc = f.read()
    start = doc.find("### Interposer from the node")
    block = doc.find("```yaml\n", start)
    end = doc.find("```", block + 8)
    if start < 0 or block < 0 or end < 0:
        return problem("docs/install.md: no ```yaml block under \"### Interposer from the node\"")
    patches = doc[block + 8:end]
    tmp = tempfile.mkdtemp(prefix="tessera-hostpath-")
    try:
        shutil.copytree(os.path.join(repo, "deploy"), os.path.join(tmp, "deploy"))
        path = os.path.join(tmp, "deploy", "overlays", "hard", "kustomization.yaml")
        text = read(path)
        if "\npatches:\n" not in text:
            return problem("deploy/overlays/hard/kustomization.yaml: no patches: list to add the docs' patches to")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace("\npatches:\n", "\npatches:\n" + patches, 1))
        objs = render(tmp, "deploy/overlays/hard")
        if objs is not None:
            check_rendered(repo, "deploy/overlays/hard + docs/install.md's hostPath patches", objs, "hard",
                           Expect(interposer_source="host-path"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_workloads(repo):
    for rel, backend in (("deploy", "hard"), ("deploy/overlays/hard", "hard"), ("deploy/overlays/mps", "mps"),
                         ("deploy/overlays/none", "none"), ("deploy/overlays/cert-manager", "hard"),
                         ("deploy/overlays/shards-example", "hard")):
        objs = render(repo, rel)
        if objs is None:
            continue
        check_rendered(repo, rel, objs, backend)
    shards = render(repo, "deploy/overlays/shards-example")
    if shards is not None:
        want = {"default": "", "a100": "a100", "h100": "h100"}
        have = {o["metadata"]["name"]: (o.get("spec") or {}).get("nodePool") or ""
                for o in shards if o.get("kind") == "SchedulingShard"}
        if have != want:
            problem("deploy/overlays/shards-example: SchedulingShards %s, want %s" % (have, want))
        if any(o.get("kind") == "ShardValues" for o in shards):
            problem("deploy/overlays/shards-example: a ShardValues object (local-config) was rendered")
    check_hostpath_patch(repo)
    cm = render(repo, "deploy/overlays/cert-manager")
    if cm is not None:
        if find(cm, "Job", "tessera-certgen-create") or find(cm, "ClusterRole", "tessera-certgen"):
            problem("deploy/overlays/cert-manager: the self-signed certgen Jobs and RBAC remain")
        cert = find(cm, "Certificate", "tessera-webhook")
        if not cert or cert["spec"]["secretName"] != "tessera-webhook-tls":
            problem("deploy/overlays/cert-manager: no Certificate writing the Secret tessera-webhook-tls")
    print("workloads: checked")


# ---------------------------------------------------------------------------------------------
# monitoring

# Histograms being added by other work; the dashboard already has their panels.
PLANNED_METRICS = {"tessera_bind_duration_seconds", "tessera_action_duration_seconds",
                   "tessera_plugin_duration_seconds"}


def check_monitoring(repo):
    import re
    sources = ""
    for path in glob.glob(os.path.join(repo, "src", "**", "*.cpp"), recursive=True):
        with open(path, encoding="utf-8") as f:
            sources += f.read()
    registered = set(re.findall(r'\.Name\("(tessera_[a-z_]+)"\)', sources))
    if not registered:
        problem("no metrics found in src/ (looked for .Name(\"tessera_...\"))")
    with open(os.path.join(repo, "deploy", "monitoring", "grafana-dashboard.json"), encoding="utf-8") as f:
        dash = json.load(f)
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p.get("targets", []))
    used = {re.sub(r"_(bucket|count|sum)$", "", m) for m in re.findall(r"\b(tessera_[a-z_]+)", exprs)}
    with open(os.path.join(repo, "docs", "metrics.md"), encoding="utf-8") as f:
        doc = f.read()
    for m in sorted(registered | PLANNED_METRICS):
        if m not in used:
            problem("metric %s is not on deploy/monitoring/grafana-dashboard.json" % m)
        if m not in doc:
            problem("metric %s is not described in docs/metrics.md" % m)
    for m in sorted(used - registered - PLANNED_METRICS):
        problem("the dashboard queries %s, which the daemon does not export" % m)
    ids = [p["id"] for p in dash["panels"]]
    if len(ids) != len(set(ids)):
        problem("grafana-dashboard.json: duplicate panel ids")
    print("monitoring: %d metrics registered, %d planned, %d on the dashboard"
          % (len(registered), len(PLANNED_METRICS), len(used)))


# ---------------------------------------------------------------------------------------------
# the RBAC table of docs/install.md

RBAC_FILES = ["deploy/rbac/*.yaml", "deploy/monitor/rbac.yaml", "deploy/certs/selfsigned/certgen.yaml"]
RBAC_SECTION = "### RBAC: what each component may do"


def rule_text(rule):
    """One rule as the table writes it: `resources (group): verbs`, resourceNames after each resource."""
    names = rule.get("resourceNames") or []
    res = ", ".join("%s %s" % (r, " ".join("`%s`" % n for n in names)) if names else r
                    for r in rule.get("resources") or [])
    groups = [g for g in rule.get("apiGroups") or [] if g]
    return "%s%s: %s" % (res, " (%s)" % ", ".join(groups) if groups else "", ", ".join(rule.get("verbs") or []))


def rbac_rows(repo):
    """(who, may) for each ServiceAccount and the role it is bound to, in file order; "nothing"
    for a ServiceAccount bound to none."""
    docs = []
    for pattern in RBAC_FILES:
        for path in sorted(glob.glob(os.path.join(repo, pattern))):
            if os.path.basename(path) != "kustomization.yaml":
                docs += [d for d in load_all(path) if isinstance(d, dict)]
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
             for d in docs if d.get("kind") in ("Role", "ClusterRole")}
    rows = []
    for sa in (d for d in docs if d.get("kind") == "ServiceAccount"):
        who = "%s/%s" % (sa["metadata"].get("namespace", ""), sa["metadata"]["name"])
        bound = False
        for b in (d for d in docs if d.get("kind") in ("RoleBinding", "ClusterRoleBinding")):
            if not any(s.get("kind") == "ServiceAccount" and "%s/%s" % (s.get("namespace", ""), s.get("name")) == who
                       for s in b.get("subjects") or []):
                continue
            ref = b["roleRef"]
            ns = b["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
            role = roles.get((ref["kind"], ns, ref["name"]))
            if role is None:
                problem("%s binds %s to %s %s, which deploy/ does not define" % (b["metadata"]["name"], who,
                                                                                  ref["kind"], ref["name"]))
                continue
            where = " in `%s`" % ns if ns else ""
            rows.append(("`%s`, %s `%s`%s" % (who, ref["kind"], ref["name"], where),
                         "; ".join(rule_text(r) for r in role.get("rules") or [])))
            bound = True
        if not bound:
            rows.append(("`%s`" % who, "nothing"))
    return rows


def check_rbac_table(repo, show=False):
    rows = rbac_rows(repo)
    if show:
        for who, may in rows:
            print("| %s | %s | ... |" % (who, may))
        return
    with open(os.path.join(repo, "docs", "install.md"), encoding="utf-8") as f:
        text = f.read()
    if RBAC_SECTION not in text:
        problem("docs/install.md has no section %r" % RBAC_SECTION)
        return
    section = text.split(RBAC_SECTION, 1)[1].split("\n### ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ServiceAccount")]
    documented = [tuple(c.strip() for c in line.strip("|").split(" | ")[:2]) for line in table]
    for want in rows:
        if want not in documented:
            problem("docs/install.md's RBAC table lacks the row %s | %s (deploy/ grants it; "
                    "check_deploy.py REPO rbactable --print prints the rows)" % want)
    for have in documented:
        if have not in rows:
            problem("docs/install.md's RBAC table has a row deploy/ does not grant: %s | %s" % have)
    print("rbactable: %d rows, each as deploy/ grants it" % len(rows))


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    repo, check = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) > 3 and os.path.isdir(sys.argv[3]) else None
    {"parse": lambda: check_parse(repo),
     "kustomize": lambda: check_kustomize(repo),
     "schemas": lambda: check_schemas(repo, shared),
     "workloads": lambda: check_workloads(repo),
     "monitoring": lambda: check_monitoring(repo),
     "rbactable": lambda: check_rbac_table(repo, show="--print" in sys.argv)}[check]()
    for p in PROBLEMS:
        print("FAIL: " + p)
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
