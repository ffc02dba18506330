#!/usr/bin/env python3
"""Checks of the Helm chart deploy/helm/tessera with the real helm (run by ctest; see
test/deploy/CMakeLists.txt).

    check_helm.py REPO_DIR CHECK [--helm HELM] [--kubectl KUBECTL] [--tessera TESSERA]
                  [--shared SHARED_SCENARIOS_DIR] [--out DIR]

helm and kubectl default to REPO_DIR/.tools/bin (scripts/install-deps.sh puts helm v4 and kubectl
v1.34 there), then to the PATH; a missing one fails the check. CHECK is one of:
  lint       `helm lint --strict` with the default values, with test/deploy/helm/values-full.yaml and
             with the values file docs/install.md shows (the block starting `# tessera-values.yaml`)
  values     values-full.yaml sets every key of values.yaml, each to something other than its
             default; each key, set alone, changes what the chart renders (no value is declared and
             left unused); the scheduler configuration rendered into tessera-config loads in
             `tessera` (tessera check); the schema's actions and plugins are those of
             src/app/actions.def and plugins.def
  schema     bad values (unknown keys, wrong types, negative replicas, bad names) fail `helm
             template` with a message naming the key
  workloads  the checks check_deploy.py runs on the kustomize overlays, on the chart rendered with
             the default values, each other isolation backend, cert-manager and values-full.yaml:
             pod security, probes, leader election, webhook wiring and failure policies, RBAC
             without wildcards, tagged images; the chart's CRD schemas (check_deploy's schemas
             check on deploy/helm/tessera/crds); the generated webhook certificate (openssl)
  compare    one source of truth: the chart with default values renders the objects `kubectl
             kustomize deploy` renders (kind, name, namespace, labels, spec, data, rules, webhooks),
             and likewise isolation mps / none against deploy/overlays/mps / none, the cert-manager
             source against deploy/overlays/cert-manager, monitoring against deploy/monitoring.
             Only the differences listed in ALLOWED (with their reasons) pass
  render     writes the chart rendered with the default values and with values-full.yaml to
             OUT/helm-default.yaml and OUT/helm-full.yaml (read by deploy_rbac_coverage's chart case)
Exits 1 with one line per problem.
"""
import argparse
import base64
import copy
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_deploy  # noqa: E402  (the manifest checks the kustomize overlays pass)
from check_deploy import problem, find  # noqa: E402

CHART = os.path.join("deploy", "helm", "tessera")
FULL_VALUES = os.path.join("test", "deploy", "helm", "values-full.yaml")
RELEASE, NAMESPACE = "tessera", "tessera-system"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
TIMEOUT_S = 120  # one helm or kubectl run; ctest bounds the whole check too
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the renderings are large


class Tools:
    def __init__(self, repo, args):
        self.repo = repo
        self.helm = self.find(args.helm, "helm")
        self.kubectl = self.find(args.kubectl, "kubectl")
        self.tessera = args.tessera
        self.tmp = tempfile.mkdtemp(prefix="tessera-helm-")

    def find(self, given, name):
        for exe in (given, os.path.join(self.repo, ".tools", "bin", name), shutil.which(name)):
            if exe and os.access(exe, os.X_OK):
                return exe
        problem("%s not found: run scripts/install-deps.sh (it unpacks helm and kubectl into .tools/bin)" % name)
        return None

    def values_file(self, values, name="values"):
        fd, path = tempfile.mkstemp(prefix=name + "-", suffix=".yaml", dir=self.tmp)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yaml.safe_dump(values, f, sort_keys=False)
        return path

    def run(self, argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", "timed out after %d s" % TIMEOUT_S)

    def template(self, values=None, files=(), crds=True):
        """(objects or None, CompletedProcess) of `helm template` with values files and a values map."""
        argv = [self.helm, "template", RELEASE, os.path.join(self.repo, CHART), "-n", NAMESPACE]
        if crds:
            argv.append("--include-crds")
        for f in files:
            argv += ["-f", f]
        if values:
            argv += ["-f", self.values_file(values)]
        r = self.run(argv)
        if r.returncode != 0:
            return None, r
        return [d for d in yaml.load_all(r.stdout, Loader=LOADER) if d is not None], r

    def must_template(self, what, values=None, files=(), crds=True):
        if not self.helm:
            return None
        objs, r = self.template(values, files, crds)
        if objs is None:
            problem("helm template (%s) failed (exit %d): %s" % (what, r.returncode, r.stderr.strip()[-2000:]))
        return objs

    def kustomize(self, rel):
        if not self.kubectl:
            return None
        os.environ["KUBECTL"] = self.kubectl  # check_deploy.render uses the same binary
        return check_deploy.render(self.repo, rel)


def full_values(repo):
    with open(os.path.join(repo, FULL_VALUES), encoding="utf-8") as f:
        return yaml.safe_load(f)


def chart_file(repo, name):
    with open(os.path.join(repo, CHART, name), encoding="utf-8") as f:
        return json.load(f) if name.endswith(".json") else yaml.safe_load(f)


def nested(path, value):
    """{"a": {"b": value}} for the path ("a", "b")."""
    for key in reversed(path):
        value = {key: value}
    return value


def merged(*maps):
    out = {}
    for m in maps:
        for k, v in m.items():
            out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def dig(m, path, default=None):
    for key in path:
        if not isinstance(m, dict) or key not in m:
            return default
        m = m[key]
    return m


# ---------------------------------------------------------------------------------------------
# lint

def docs_values(t):
    """The values file docs/install.md shows, written to a file."""
    with open(os.path.join(t.repo, "docs", "install.md"), encoding="utf-8") as f:
        m = re.search(r"```yaml\n# tessera-values.yaml\n(.*?)```", f.read(), re.S)
    if not m:
        problem("docs/install.md: no ```yaml block starting with `# tessera-values.yaml`")
        return None
    return t.values_file(yaml.safe_load(m.group(1)), "docs-values")


def check_lint(t):
    if not t.helm:
        return
    lints = [("default values", []), ("values-full.yaml", ["-f", os.path.join(t.repo, FULL_VALUES)])]
    docs = docs_values(t)
    if docs:
        lints.append(("docs/install.md's values file", ["-f", docs]))
    for what, extra in lints:
        r = t.run([t.helm, "lint", "--strict", os.path.join(t.repo, CHART)] + extra)
        if r.returncode != 0:
            problem("helm lint --strict (%s) failed: %s" % (what, (r.stdout + r.stderr).strip()[-2000:]))
        else:
            print("lint: %s: %s" % (what, r.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------------------------
# values

def schema_node(schema, node):
    while "$ref" in node:
        node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
    return node


def leaves(values, schema, node=None, path=()):
    """(path, default) of every key of values.yaml that a user sets: descends into maps whose schema
    lists their properties; a free-form map (labels, nodeSelector), a list or a scalar is one key."""
    node = schema_node(schema, node if node is not None else schema)
    if isinstance(values, dict) and values and "properties" in node:
        for k, v in values.items():
            yield from leaves(v, schema, node["properties"].get(k, {}), path + (k,))
    else:
        yield path, values


# Keys whose value in values-full.yaml is their default, and what else shows they are used:
# (the value to render instead, other values that must be set with it for it to show).
ALTERNATIVES = {
    ("isolation",): ("none", {}),
    ("webhook", "certificate", "source"): ("cert-manager", {}),
    ("scheduler", "leaderElection", "enabled"): (False, {"scheduler": {"replicas": 1}}),
    ("scheduler", "podDisruptionBudget", "enabled"): (False, {}),
    ("webhook", "podDisruptionBudget", "enabled"): (False, {}),
    ("monitoring", "serviceMonitor", "enabled"): (True, {}),
    ("monitoring", "grafanaDashboard", "enabled"): (True, {}),
    ("monitoring", "networkPolicy", "enabled"): (True, {}),
    ("monitor", "enabled"): (False, {}),  # true is what isolation hard does anyway
}
# Keys that only render with others set: the prefix -> those values.
CONTEXT = {
    ("webhook", "certificate", "certManager"): {"webhook": {"certificate": {"source": "cert-manager"}}},
    ("monitoring", "serviceMonitor"): {"monitoring": {"serviceMonitor": {"enabled": True}}},
    ("monitoring", "grafanaDashboard"): {"monitoring": {"grafanaDashboard": {"enabled": True}}},
    ("monitoring", "networkPolicy"): {"monitoring": {"networkPolicy": {"enabled": True}}},
}


def without_generated(objs):
    """The objects less what differs on every render: the generated certificate and CA."""
    out = copy.deepcopy(objs)
    for o in out:
        if o["kind"] == "Secret" and o["metadata"]["name"] == "tessera-webhook-tls":
            o["data"] = {k: "<generated>" for k in o.get("data") or {}}
        if o["kind"] in WEBHOOK_KINDS:
            for hook in o.get("webhooks", []):
                if "caBundle" in hook["clientConfig"]:
                    hook["clientConfig"]["caBundle"] = "<generated>"
    return out


def check_values(t, shared):
    if not t.helm:
        return
    defaults, schema, full = chart_file(t.repo, "values.yaml"), chart_file(t.repo, "values.schema.json"), full_values(t.repo)
    keys = list(leaves(defaults, schema))
    renders, base_cache = 0, {}
    for path, default in keys:
        name = ".".join(path)
        value = dig(full, path, KeyError)
        if value is KeyError:
            problem("%s does not set %s" % (FULL_VALUES, name))
            continue
        alternative, context = ALTERNATIVES.get(path, (None, {}))
        if value == default and path not in ALTERNATIVES:
            problem("%s sets %s to its default %r: set something else, so the key is exercised" % (FULL_VALUES, name, value))
            continue
        if path in ALTERNATIVES:
            value = alternative
        for prefix, extra in CONTEXT.items():
            if path[:len(prefix)] == prefix and dig(extra, path, KeyError) is KeyError:
                context = merged(context, extra)
        if path == ("webhook", "certificate", "validityDays"):
            check_validity_days(t, value)  # its only effect is inside the random certificate
            continue
        key = json.dumps(context, sort_keys=True)
        if key not in base_cache:
            base_cache[key] = t.must_template("context %s" % key, context, crds=False)
        objs = t.must_template("only %s" % name, merged(context, nested(path, value)), crds=False)
        renders += 1
        if base_cache[key] is not None and objs is not None and without_generated(objs) == without_generated(base_cache[key]):
            problem("values.yaml key %s changes nothing the chart renders (set to %r)" % (name, value))
    print("values: %d keys, each set in %s and used by the chart (%d renders)" % (len(keys), FULL_VALUES, renders))

    for what, files in (("default values", []), ("values-full.yaml", [os.path.join(t.repo, FULL_VALUES)])):
        objs = t.must_template(what, files=files)
        if objs:
            check_config_loads(t, what, objs)
    check_registry_names(t.repo, schema)


def check_validity_days(t, days):
    objs = t.must_template("validityDays", {"webhook": {"certificate": {"validityDays": days}}})
    secret = find(objs or [], "Secret", "tessera-webhook-tls")
    if not secret:
        return problem("validityDays: no Secret tessera-webhook-tls rendered")
    for key in ("tls.crt", "ca"):
        start, end = cert_dates(t, base64.b64decode(secret["data"][key]))
        if start and end and abs((end - start) - datetime.timedelta(days=days)) > datetime.timedelta(hours=1):
            problem("webhook.certificate.validityDays %d: %s valid from %s to %s" % (days, key, start, end))


def cert_dates(t, pem):
    path = os.path.join(t.tmp, "cert.pem")
    with open(path, "wb") as f:
        f.write(pem)
    r = t.run(["openssl", "x509", "-noout", "-startdate", "-enddate", "-in", path])
    if r.returncode != 0:
        problem("openssl x509 failed on the generated certificate: %s" % r.stderr.strip())
        return None, None
    dates = dict(line.split("=", 1) for line in r.stdout.strip().splitlines())
    fmt = "%b %d %H:%M:%S %Y %Z"
    return (datetime.datetime.strptime(" ".join(dates["notBefore"].split()), fmt),
            datetime.datetime.strptime(" ".join(dates["notAfter"].split()), fmt))


def check_config_loads(t, what, objs):
    """The rendered configuration is one the daemon accepts: `tessera check` on a scenario with it."""
    cm = find(objs, "ConfigMap", "tessera-config")
    if not cm:
        return problem("%s: no ConfigMap tessera-config" % what)
    config = yaml.safe_load(cm["data"]["tessera.yaml"])
    if not t.tessera:
        return problem("no tessera binary given (--tessera): cannot check the rendered configuration")
    scenario = t.values_file({"name": "helm-config", "description": "the chart's configuration (%s)" % what,
                              "config": config, "objects": []}, "scenario")
    r = t.run([t.tessera, "check", scenario])
    if r.returncode != 0:
        problem("%s: the rendered tessera-config does not load: %s" % (what, (r.stdout + r.stderr).strip()))
    else:
        print("values: %s: tessera-config loads in tessera" % what)


def check_registry_names(repo, schema):
    def names(path, macro):
        with open(os.path.join(repo, path), encoding="utf-8") as f:
            return sorted(re.findall(macro + r'\("([a-z]+)"', f.read()))
    config = schema["properties"]["scheduler"]["properties"]["config"]["properties"]
    actions, plugins = names("src/app/actions.def", "TESSERA_ACTION"), names("src/app/plugins.def", "TESSERA_PLUGIN")
    for what, got, want in (("actions", config["actions"]["items"]["enum"], actions),
                            ("actionArgs", config["actionArgs"]["properties"], actions),
                            ("plugins", config["plugins"]["properties"], plugins),
                            ("tiers", config["tiers"]["items"]["items"]["enum"], plugins)):
        if sorted(got) != want:
            problem("values.schema.json: scheduler.config.%s names %s; the registry has %s" % (what, sorted(got), want))


# ---------------------------------------------------------------------------------------------
# schema

# (what, values, words the error must contain: the key, as helm names it).
BAD_VALUES = [
    ("an unknown top-level key", {"replicaCount": 3}, ["replicaCount"]),
    ("a misspelt key", {"scheduler": {"replica": 2}}, ["scheduler", "replica"]),
    ("a misspelt plugin argument", {"scheduler": {"config": {"plugins": {"nodeorder": {"nodes": "spread"}}}}},
     ["nodeorder", "nodes"]),
    ("an unknown plugin", {"scheduler": {"config": {"plugins": {"drf": {}}}}}, ["plugins", "drf"]),
    ("an unknown action", {"scheduler": {"config": {"actions": ["allocate", "shuffle"]}}}, ["actions"]),
    ("replicas as text", {"scheduler": {"replicas": "two"}}, ["scheduler", "replicas"]),
    ("a timeout with a unit", {"webhook": {"timeoutSeconds": "5s"}}, ["webhook", "timeoutSeconds"]),
    ("a number as a label value", {"commonLabels": {"team": 7}}, ["commonLabels", "team"]),
    ("a duration as a number", {"scheduler": {"config": {"schedulePeriod": 1}}}, ["schedulePeriod"]),
    ("negative scheduler replicas", {"scheduler": {"replicas": -1}}, ["scheduler", "replicas"]),
    ("negative webhook replicas", {"webhook": {"replicas": -2}}, ["webhook", "replicas"]),
    ("no webhook replica (it fails closed)", {"webhook": {"replicas": 0}}, ["webhook", "replicas"]),
    ("a negative QPS", {"scheduler": {"kubeApiQps": -5}}, ["kubeApiQps"]),
    ("an unknown isolation backend", {"isolation": "soft"}, ["isolation"]),
    ("a lower-case failure policy", {"webhook": {"mutatingFailurePolicy": "fail"}}, ["mutatingFailurePolicy"]),
    ("an argument out of range", {"scheduler": {"config": {"actionArgs": {"consolidate": {"maxConsolidationPreemptees": 0}}}}},
     ["maxConsolidationPreemptees"]),
    ("an unknown certificate source", {"webhook": {"certificate": {"source": "vault"}}}, ["certificate", "source"]),
    ("a bad toleration operator", {"interposer": {"tolerations": [{"key": "k", "operator": "exists"}]}},
     ["tolerations", "operator"]),
    ("a monitor enabled as text", {"monitor": {"enabled": "yes"}}, ["monitor", "enabled"]),
    ("an unknown interposer source", {"interposer": {"source": "host-path"}}, ["interposer", "source"]),
    ("a relative kubelet pods folder", {"monitor": {"kubeletPodsDir": "var/lib/kubelet/pods"}},
     ["monitor", "kubeletPodsDir"]),
    ("a misspelt monitor key", {"monitor": {"cleanupIntervall": 30}}, ["monitor", "cleanupIntervall"]),
    ("a monitor port out of range", {"monitor": {"port": 70000}}, ["monitor", "port"]),
    ("a zero cleanup interval", {"monitor": {"cleanupInterval": 0}}, ["monitor", "cleanupInterval"]),
    ("a negative stale grace", {"monitor": {"staleGrace": -1}}, ["monitor", "staleGrace"]),
    ("a stale grace with a unit", {"monitor": {"staleGrace": "5m"}}, ["monitor", "staleGrace"]),
    ("a lower-case monitor pull policy", {"monitor": {"image": {"pullPolicy": "always"}}}, ["monitor", "pullPolicy"]),
    ("two replicas without leader election",
     {"scheduler": {"replicas": 2, "leaderElection": {"enabled": False}}}, ["scheduler.replicas", "leaderElection"]),
]


def check_schema(t):
    if not t.helm:
        return
    for what, values, words in BAD_VALUES:
        objs, r = t.template(values, crds=False)
        message = r.stderr.strip()
        if objs is not None:
            problem("values with %s: helm template accepted them" % what)
        elif not all(w in message for w in words):
            problem("values with %s: the error does not name %s: %s" % (what, " and ".join(words), message[-1000:]))
        else:
            named = [line.strip() for line in message.splitlines() if all(w in line for w in words)]
            print("schema: %s: %s" % (what, (named or [message])[0]))


# ---------------------------------------------------------------------------------------------
# workloads

def config_equal_to_defaults(text, repo):
    return yaml.safe_load(text or "") == yaml.safe_load(check_deploy.read(os.path.join(repo, "config", "tessera.yaml")))


def check_workloads(t, shared):
    default = check_deploy.Expect(config=config_equal_to_defaults,
                                  config_wanted="config/tessera.yaml (scheduler.config in values.yaml)")
    renders = [("helm (default values)", {}, [], "hard", default),
               ("helm (isolation mps)", {"isolation": "mps"}, [], "mps", default),
               ("helm (isolation none)", {"isolation": "none"}, [], "none", default),
               ("helm (cert-manager)", {"webhook": {"certificate": {"source": "cert-manager"}}}, [], "hard", default),
               ("helm (interposer.source hostPath)", {"interposer": {"source": "hostPath"}}, [], "hard",
                check_deploy.Expect(config=config_equal_to_defaults,
                                    config_wanted="config/tessera.yaml (scheduler.config in values.yaml)",
                                    interposer_source="host-path"))]
    full = full_values(t.repo)
    sched_name = full["schedulerName"]
    full_expect = check_deploy.Expect(
        scheduler_replicas=full["scheduler"]["replicas"],
        scheduler_name=sched_name,
        failure_policies={"MutatingWebhookConfiguration": full["webhook"]["mutatingFailurePolicy"],
                          "ValidatingWebhookConfiguration": full["webhook"]["validatingFailurePolicy"]},
        excluded_namespaces=tuple(full["webhook"]["excludedNamespaces"]) + (NAMESPACE, "tessera-reservation"),
        config=lambda text, repo: (yaml.safe_load(text) or {}).get("schedulerName") == sched_name,
        config_wanted="a configuration with schedulerName %s" % sched_name,
        interposer_source={"initContainer": "init-container", "hostPath": "host-path"}[full["interposer"]["source"]],
        kubelet_pods_dir=full["monitor"]["kubeletPodsDir"])
    renders.append(("helm (values-full.yaml)", {}, [os.path.join(t.repo, FULL_VALUES)], full["isolation"], full_expect))
    for where, values, files, backend, expect in renders:
        objs = t.must_template(where, values, files)
        if objs is None:
            continue
        check_deploy.check_rendered(t.repo, where, objs, backend, expect)
        check_certificate(t, where, objs, values)
    check_deploy.check_schemas(t.repo, shared, os.path.join(CHART, "crds"))
    print("workloads: %d renderings checked" % len(renders))


def check_certificate(t, where, objs, values):
    """source helm: a Secret with a certificate for the Service signed by the CA both webhook
    configurations trust; source cert-manager: a Certificate writing that Secret."""
    secret, cert = find(objs, "Secret", "tessera-webhook-tls"), find(objs, "Certificate", "tessera-webhook")
    if dig(values, ("webhook", "certificate", "source")) == "cert-manager":
        if secret or not cert or cert["spec"]["secretName"] != "tessera-webhook-tls":
            problem("%s: want a Certificate writing the Secret tessera-webhook-tls and no Secret" % where)
        for kind in WEBHOOK_KINDS:
            ann = (find(objs, kind, "tessera-webhook")["metadata"].get("annotations") or {})
            if ann.get("cert-manager.io/inject-ca-from") != NAMESPACE + "/tessera-webhook":
                problem("%s: %s has no cert-manager.io/inject-ca-from" % (where, kind))
        return
    if not secret or set(secret.get("data") or {}) != {"tls.crt", "tls.key", "ca"}:
        return problem("%s: want the Secret tessera-webhook-tls with tls.crt, tls.key and ca" % where)
    for kind in WEBHOOK_KINDS:
        for hook in find(objs, kind, "tessera-webhook")["webhooks"]:
            if hook["clientConfig"].get("caBundle") != secret["data"]["ca"]:
                problem("%s: %s caBundle is not the Secret's CA" % (where, kind))
    paths = {}
    for key in ("tls.crt", "ca", "tls.key"):
        paths[key] = os.path.join(t.tmp, key)
        with open(paths[key], "wb") as f:
            f.write(base64.b64decode(secret["data"][key]))
    r = t.run(["openssl", "verify", "-CAfile", paths["ca"], paths["tls.crt"]])
    if r.returncode != 0:
        problem("%s: the webhook certificate is not signed by its CA: %s" % (where, (r.stdout + r.stderr).strip()))
    r = t.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", paths["tls.crt"]])
    want = "tessera-webhook.%s.svc" % NAMESPACE
    if r.returncode != 0 or "DNS:" + want not in r.stdout:
        problem("%s: the webhook certificate is not for %s: %s" % (where, want, (r.stdout + r.stderr).strip()))
    mods = [t.run(["openssl", kind, "-noout", "-modulus", "-in", paths[key]]).stdout
            for kind, key in (("x509", "tls.crt"), ("rsa", "tls.key"))]
    if not mods[0] or mods[0] != mods[1]:
        problem("%s: tls.key is not the key of tls.crt" % where)


# ---------------------------------------------------------------------------------------------
# compare

CERTGEN = [(kind, ns, "tessera-certgen") for kind, ns in (
    ("ServiceAccount", NAMESPACE), ("Role", NAMESPACE), ("RoleBinding", NAMESPACE),
    ("ClusterRole", ""), ("ClusterRoleBinding", ""))] + [
    ("Job", NAMESPACE, "tessera-certgen-create"), ("Job", NAMESPACE, "tessera-certgen-patch")]
# The differences between the chart and deploy/ that are by design, each with its reason.
ALLOWED = {
    "kustomize only": {
        ("Namespace", "", NAMESPACE): "helm installs into an existing namespace (--create-namespace)",
        **{k: "the chart makes the webhook certificate itself (webhook.certificate.source helm)" for k in CERTGEN},
    },
    "chart only": {
        ("Secret", NAMESPACE, "tessera-webhook-tls"):
            "written by helm (source helm); in deploy/ by the certgen Job or cert-manager",
    },
    "labels": {"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
               "helm.sh/chart"},
    "pod annotations": {"checksum/config": "rolls the scheduler on a new configuration (deploy/: the ConfigMap's hashed name)"},
}
HASHED = re.compile(r"^(.*)-[a-z0-9]{10}$")


def object_key(o):
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def unhash_configmaps(objs):
    """kustomize's configMapGenerator names (tessera-config-5h2k9m8f7t) -> the chart's fixed names,
    in the ConfigMaps and wherever they are referenced."""
    names = {}
    for o in objs:
        m = HASHED.match(o["metadata"]["name"]) if o["kind"] == "ConfigMap" else None
        if m:
            names[o["metadata"]["name"]] = m.group(1)

    def rename(x):
        if isinstance(x, dict):
            return {k: rename(v) for k, v in x.items()}
        if isinstance(x, list):
            return [rename(v) for v in x]
        return names.get(x, x) if isinstance(x, str) else x
    return [rename(o) for o in objs]


def diff(a, b, path, out):
    """Paths where the chart's a differs from kustomize's b."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = "%s.%s" % (path, k) if path else k
            if k not in a:
                out.append("%s: only in kustomize (%s)" % (sub, json.dumps(b[k])[:200]))
            elif k not in b:
                out.append("%s: only in the chart (%s)" % (sub, json.dumps(a[k])[:200]))
            else:
                diff(a[k], b[k], sub, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out)
    elif a != b:
        out.append("%s: chart %s, kustomize %s" % (path, json.dumps(a)[:200], json.dumps(b)[:200]))


def comparable(o, side):
    """o without what may differ by design: helm's own labels, the generated certificate, the
    configuration's comments."""
    o = copy.deepcopy(o)
    meta = o.pop("metadata")
    o["metadata"] = {k: meta[k] for k in ("name", "namespace") if k in meta}
    o["metadata"]["annotations"] = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    o["metadata"]["labels"] = {k: v for k, v in labels.items() if side == "kustomize" or k not in ALLOWED["labels"]}
    tmpl = (o.get("spec") or {}).get("template") or {}
    if side == "chart" and "metadata" in tmpl:
        ann = tmpl["metadata"].get("annotations") or {}
        for k in ALLOWED["pod annotations"]:
            ann.pop(k, None)
        if not ann:
            tmpl["metadata"].pop("annotations", None)
    if o["kind"] in WEBHOOK_KINDS and side == "chart":
        for hook in o.get("webhooks", []):
            hook["clientConfig"].pop("caBundle", None)  # generated: checked by the workloads check
    if o["kind"] == "ConfigMap":
        for k, v in list((o.get("data") or {}).items()):
            if k.endswith(".yaml"):
                o["data"][k] = yaml.safe_load(v)  # toYaml drops config/tessera.yaml's comments
    return o


def compare(chart, kustomize, where):
    chart = {object_key(o): o for o in chart}
    kustomize = {object_key(o): o for o in unhash_configmaps(kustomize)}
    allowed = 0
    for key in sorted(set(kustomize) - set(chart)):
        if key in ALLOWED["kustomize only"]:
            allowed += 1
        else:
            problem("%s: %s %s/%s is in deploy/ but not in the chart" % (where, key[0], key[1], key[2]))
    for key in sorted(set(chart) - set(kustomize)):
        if key in ALLOWED["chart only"]:
            allowed += 1
        else:
            problem("%s: %s %s/%s is in the chart but not in deploy/" % (where, key[0], key[1], key[2]))
    same = 0
    for key in sorted(set(chart) & set(kustomize)):
        out = []
        diff(comparable(chart[key], "chart"), comparable(kustomize[key], "kustomize"), "", out)
        for d in out:
            problem("%s: %s %s/%s: %s" % (where, key[0], key[1], key[2], d))
        same += not out
    print("compare: %s: %d objects the same, %d allowed differences" % (where, same, allowed))


def check_compare(t):
    pairs = [("default values vs deploy/", {}, ["deploy"]),
             ("isolation mps vs deploy/overlays/mps", {"isolation": "mps"}, ["deploy/overlays/mps"]),
             ("isolation none vs deploy/overlays/none", {"isolation": "none"}, ["deploy/overlays/none"]),
             ("cert-manager vs deploy/overlays/cert-manager", {"webhook": {"certificate": {"source": "cert-manager"}}},
              ["deploy/overlays/cert-manager"]),
             ("monitoring vs deploy/ + deploy/monitoring",
              {"monitoring": {"serviceMonitor": {"enabled": True}, "grafanaDashboard": {"enabled": True},
                              "networkPolicy": {"enabled": True}}},
              ["deploy", "deploy/monitoring"])]
    for where, values, rels in pairs:
        chart = t.must_template(where, values)
        kustomize = [t.kustomize(rel) for rel in rels]
        if chart is None or any(k is None for k in kustomize):
            continue
        compare(chart, [o for k in kustomize for o in k], where)
    for reason in sorted(set(ALLOWED["kustomize only"].values()) | set(ALLOWED["chart only"].values())):
        print("compare: allowed: %s" % reason)


# ---------------------------------------------------------------------------------------------
# render

def check_render(t, out):
    if not out:
        return problem("render: --out DIR is required")
    os.makedirs(out, exist_ok=True)
    for name, files in (("helm-default.yaml", []), ("helm-full.yaml", [os.path.join(t.repo, FULL_VALUES)])):
        objs = t.must_template(name, files=files)
        if objs is not None:
            with open(os.path.join(out, name), "w", encoding="utf-8") as f:
                yaml.safe_dump_all(objs, f, sort_keys=False)
            print("render: %s: %d objects" % (os.path.join(out, name), len(objs)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo")
    parser.add_argument("check", choices=["lint", "values", "schema", "workloads", "compare", "render"])
    parser.add_argument("--helm")
    parser.add_argument("--kubectl")
    parser.add_argument("--tessera")
    parser.add_argument("--shared")
    parser.add_argument("--out")
    args = parser.parse_args()
    t = Tools(os.path.abspath(args.repo), args)
    shared = args.shared if args.shared and os.path.isdir(args.shared) else None
    try:
        {"lint": lambda: check_lint(t),
         "values": lambda: check_values(t, shared),
         "schema": lambda: check_schema(t),
         "workloads": lambda: check_workloads(t, shared),
         "compare": lambda: check_compare(t),
         "render": lambda: check_render(t, args.out)}[args.check]()
    finally:
        shutil.rmtree(t.tmp, ignore_errors=True)
    for p in check_deploy.PROBLEMS:
        print("FAIL: " + p)
    return 1 if check_deploy.PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
