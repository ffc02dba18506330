#!/usr/bin/env python3
"""Runs the README's "Try it without a cluster" commands as written, with the real kubectl, against
`tessera serve-cluster`, and checks what each prints.

What differs from a person typing them: serve-cluster listens on port 0 and the URL it prints
replaces http://127.0.0.1:8001 in later commands; /tmp/kc becomes a file of a temporary directory;
`tessera run` gets `--health-port 0` (tests run side by side); after it starts, the test waits (at
most 60 s) until the scheduler has bound pods and written the sweep's FailedScheduling Event;
every command is bounded in time, a watch (-w)
by a few seconds (as Ctrl-C would). Usage:
  kubectl_walkthrough.py SOURCE_DIR TESSERA KUBECTL
"""
import os
import re
import subprocess
import sys
import tempfile
import time

COMMAND_TIMEOUT = 30  # seconds, every kubectl call
WATCH_SECONDS = 8     # how long a `-w` runs before the test "presses Ctrl-C"

# What the output of a command must show, by a fragment of the command (first match wins).
EXPECT = [
    ("get nodes", ["h100-a1", "Ready", "infer-1"]),
    ("get pods -A", ["NAMESPACE", "sweep-0", "Pending"]),
    ("get pods -n ml -o wide", ["h100-a", "NODE", "sweep-0"]),
    ("get q,pg -A", ["queue.scheduling.tessera.dev/research", "podgroup.scheduling.tessera.dev/sweep",
                     "GPU QUOTA", "MINMEMBER", "PHASE"]),
    ("get tessera -A", ["queue.scheduling.tessera.dev/research", "podgroup.scheduling.tessera.dev/sweep"]),
    ("describe pod -n ml sweep-0", ["Name:", "sweep-0", "Events:", "FailedScheduling", "untolerated taint"]),
    ("get events -n ml --field-selector", ["FailedScheduling", "pod/sweep-0"]),
    ("apply -f deploy/examples/queue-default.yaml", ["queue.scheduling.tessera.dev/default"]),
    ("apply -f deploy/examples/gang-job.yaml", ["podgroup.scheduling.tessera.dev/train", "job.batch/train"]),
    ("get podgroup,job -n team-a", ["podgroup.scheduling.tessera.dev/train", "job.batch/train", "MINMEMBER"]),
    ("explain queue.spec.resources", ["KIND:", "Queue", "gpu"]),
    ("-l job=sweep -w", ["sweep-0", "sweep-1"]),
    ("delete pod -n ml notebook-bob", ['pod "notebook-bob" deleted']),
]


def readme_commands(source_dir):
    text = open(os.path.join(source_dir, "README.md"), encoding="utf-8").read()
    section = re.search(r"^#+ Try it without a cluster\n(.*?)(?=^#+ )", text, re.S | re.M)
    if not section:
        sys.exit('README.md has no "Try it without a cluster" section')
    block = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    if not block:
        sys.exit('README.md: the "Try it without a cluster" section has no ```sh block')
    commands = []
    for line in block.group(1).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def strip_comment(line):
    """The command without its trailing `# comment` (a '#' inside quotes is kept)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def text(data):
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def main():
    source_dir, tessera, kubectl = sys.argv[1:4]
    if not kubectl or not os.access(kubectl, os.X_OK):
        sys.exit("kubectl not found: run scripts/install-deps.sh (it puts kubectl v1.34 in .tools/bin)")
    tmp = tempfile.mkdtemp(prefix="tessera-kubectl-")
    bindir = os.path.join(tmp, "bin")
    os.mkdir(bindir)
    os.symlink(os.path.abspath(tessera), os.path.join(bindir, "tessera"))
    os.symlink(os.path.abspath(kubectl), os.path.join(bindir, "kubectl"))
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["HOME"] = tmp  # kubectl's discovery cache and any default kubeconfig: ours alone
    env.pop("KUBECONFIG", None)
    kubeconfig = os.path.join(tmp, "kc")

    background = []
    failures = []
    url = None
    try:
        for line in readme_commands(source_dir):
            command = strip_comment(line)
            command = command.replace("/tmp/kc", kubeconfig)
            if url:
                command = command.replace("http://127.0.0.1:8001", url)
            if command.startswith("export "):
                name, _, value = command[len("export "):].partition("=")
                env[name] = value
                print(f"$ {line}")
                continue
            if command.endswith("&"):
                command = command[:-1].strip()
                if command.startswith("tessera serve-cluster"):
                    command = command.replace("--port 8001", "--port 0")
                if command.startswith("tessera run"):
                    command += " --health-port 0"
                print(f"$ {line}   [background: {command}]")
                log = open(os.path.join(tmp, f"bg{len(background)}.log"), "w+")
                proc = subprocess.Popen(command, shell=True, cwd=source_dir, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                background.append((proc, log))
                if command.startswith("tessera serve-cluster"):
                    url = wait_for_url(log)
                if command.startswith("tessera run"):
                    wait_for_binds(kubectl, url, env)
                continue
            watch = " -w" in command
            print(f"$ {line}")
            try:
                r = subprocess.run(command, shell=True, cwd=source_dir, env=env, capture_output=True, text=True,
                                   timeout=WATCH_SECONDS if watch else COMMAND_TIMEOUT)
                out, rc = r.stdout + r.stderr, r.returncode
            except subprocess.TimeoutExpired as e:
                out = text(e.stdout) + text(e.stderr)
                rc = None if watch else "timeout"
            print(out.rstrip())
            if rc not in (0, None):
                failures.append(f"{line}\n    exit {rc}")
                continue
            for fragment, wanted in EXPECT:
                if fragment in command:
                    missing = [w for w in wanted if w not in out]
                    if missing:
                        failures.append(f"{line}\n    output lacks {missing}")
                    break
        if url:
            failures += field_validation(kubectl, tmp, env)
            failures += custom_resources(kubectl, tmp, env, source_dir)
    finally:
        for proc, log in background:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()
            log.seek(0)
            tail = log.read()[-3000:]
            print(f"--- background process log (exit {proc.returncode}) ---\n{tail}")
    if failures:
        print("\nFAILED:\n" + "\n".join(failures))
        return 1
    print("\nevery README command ran as written")
    return 0


def field_validation(kubectl, tmp, env):
    """kubectl apply of a manifest with a misspelt field: refused under kubectl's default
    --validate=strict (the server's fieldValidation=Strict), applied with the server's Warning
    printed under --validate=warn."""
    bad = os.path.join(tmp, "typo.yaml")
    with open(bad, "w") as f:
        f.write("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: typo}\n"
                "spec: {prority: 5, resources: {gpu: {quota: \"1\"}}}\n")
    failures = []
    for args, want_rc, wanted in ((["apply", "-f", bad], "nonzero", 'unknown field "spec.prority"'),
                                  (["apply", "--validate=warn", "-f", bad], 0,
                                   'Warning: unknown field "spec.prority"')):
        line = "kubectl " + " ".join(args)
        print(f"$ {line}")
        r = subprocess.run([kubectl] + args, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        out = r.stdout + r.stderr
        print(out.rstrip())
        if (want_rc == 0) != (r.returncode == 0):
            failures.append(f"{line}\n    exit {r.returncode}, want {want_rc}")
        if wanted not in out:
            failures.append(f"{line}\n    output lacks {wanted!r}")
    return failures


CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Colour, type: string, jsonPath: .spec.colour}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {colour: {type: string}}}
"""

WIDGET = """apiVersion: example.com/v1
kind: Widget
metadata: {name: blue-one, namespace: ml}
spec: {colour: blue}
"""


def custom_resources(kubectl, tmp, env, source_dir):
    """A CRD applied with kubectl makes its kind served: a Widget applied, listed by plural and
    short name with the CRD's printer column, deleted; Tessera's own CRDs apply unchanged."""
    crd = os.path.join(tmp, "widget-crd.yaml")
    with open(crd, "w") as f:
        f.write(CRD)
    widget = os.path.join(tmp, "widget.yaml")
    with open(widget, "w") as f:
        f.write(WIDGET)
    crds = os.path.join(source_dir, "deploy", "crds")
    ours = sorted(os.path.join(crds, n) for n in os.listdir(crds) if n.endswith(".yaml") and n != "kustomization.yaml")
    tessera_crds = []
    for path in ours:
        tessera_crds += ["-f", path]
    steps = (
        (["apply", "-f", crd], ["customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"]),
        (["get", "crds"], ["widgets.example.com"]),
        (["apply"] + tessera_crds, ["queues.scheduling.tessera.dev"]),
        (["get", "queues"], ["research"]),
        (["apply", "-f", widget], ["widget.example.com/blue-one created"]),
        (["get", "widgets", "-n", "ml"], ["COLOUR", "blue-one", "blue"]),
        (["get", "wd", "-A"], ["NAMESPACE", "ml", "blue-one", "blue"]),
        (["api-resources", "--api-group=example.com"], ["widgets", "wd", "Widget"]),
        (["delete", "widget", "blue-one", "-n", "ml"], ['"blue-one" deleted']),
        (["get", "wd", "-n", "ml"], ["No resources found"]),
    )
    failures = []
    for args, wanted in steps:
        line = "kubectl " + " ".join(args)
        print(f"$ {line}")
        r = subprocess.run([kubectl] + args, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        out = r.stdout + r.stderr
        print(out.rstrip())
        if r.returncode != 0:
            failures.append(f"{line}\n    exit {r.returncode}")
        missing = [w for w in wanted if w not in out]
        if missing:
            failures.append(f"{line}\n    output lacks {missing}")
    return failures


def wait_for_url(log):
    deadline = time.time() + 30
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"at (http://127\.0\.0\.1:\d+)", log.read())
        if m:
            return m.group(1)
        time.sleep(0.1)
    sys.exit("tessera serve-cluster printed no URL within 30 s")


def wait_for_binds(kubectl, url, env):
    """Until the scheduler has bound the demo's pods and said why the sweep waits (its Events are
    written after the binds): a person would look a few seconds later."""
    deadline = time.time() + 60
    while time.time() < deadline:
        bound = subprocess.run([kubectl, "--server", url, "get", "pods", "-n", "ml", "-o",
                                "jsonpath={.items[*].spec.nodeName}"], env=env, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT)
        said = subprocess.run([kubectl, "--server", url, "get", "events", "-n", "ml", "--field-selector",
                               "reason=FailedScheduling,involvedObject.name=sweep-0", "-o", "name"], env=env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        if bound.returncode == 0 and bound.stdout.strip() and said.returncode == 0 and said.stdout.strip():
            return
        time.sleep(0.5)
    sys.exit("tessera run bound no pod, or wrote no FailedScheduling Event for ml/sweep-0, within 60 s")


if __name__ == "__main__":
    sys.exit(main())
