#!/usr/bin/env python3
"""Browser tests of the web UI (docs/ui.md) with headless Chromium, as a person would open it.

live:   `tessera serve-cluster config/examples/demo.yaml --ui-port 0`, `tessera run --ui-port 0` against it, and
        a half-GPU notebook created through the API server; once the scheduler has placed it, the
        page at the daemon's UI address must show the queue bars with the figures of
        /api/v1/state, the demo's pending sweep with its reason (the untolerated taint) and the
        notebook as a fractional occupant of a GPU; serve-cluster's own page must show the sweep's
        reason as the daemon wrote it on its pods.
report: `tessera simulate config/examples/fractional.yaml --html` must show PASSED, the slider,
        and, at its last cycle, the two half-GPU notebooks sharing a GPU of h100-1.

The DOM Chromium renders (--dump-dom) is checked by ui/check_dom.py; screenshots go to OUT_DIR.
No JavaScript error may reach Chromium's console. Exit 77 (ctest: skipped) only when Chromium is
not installed. Usage:
  browser_test.py live|report SOURCE_DIR TESSERA OUT_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

STEP_TIMEOUT = 90     # seconds: a daemon step (start, placing the notebook)
BROWSER_TIMEOUT = 90  # seconds: one Chromium run

NOTEBOOK = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "notebook-ui", "namespace": "ml", "labels": {"tessera.dev/queue": "research"},
                 "annotations": {"gpu-fraction": "0.5"}},
    "spec": {"schedulerName": "tessera",
             "containers": [{"name": "jupyter", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                             "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]},
}


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(browser, url, out_dir, name):
    """Renders `url`; returns the DOM. Saves NAME.html and NAME.png; fails on console errors."""
    common = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--hide-scrollbars", "--virtual-time-budget=8000"]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(common + ["--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
                                       "--dump-dom", url],
                             capture_output=True, text=True, timeout=BROWSER_TIMEOUT)
    if dom.returncode != 0 or "data-rendered" not in dom.stdout:
        sys.exit(f"{name}: Chromium did not render the page (exit {dom.returncode}):\n{dom.stderr[-3000:]}")
    errors = [l for l in dom.stderr.splitlines() if "CONSOLE" in l and ("Uncaught" in l or "ERROR" in l)]
    if errors:
        sys.exit(f"{name}: JavaScript errors in the console:\n" + "\n".join(errors))
    path = os.path.join(out_dir, name + ".html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(dom.stdout)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(common + ["--user-data-dir=" + profile, "--window-size=1400,2000",
                                 "--screenshot=" + os.path.join(out_dir, name + ".png"), url],
                       capture_output=True, timeout=BROWSER_TIMEOUT)
    print(f"{name}: rendered {url}; DOM {path}, screenshot {os.path.join(out_dir, name + '.png')}")
    return path


def check_dom(source_dir, dom_path, expect, out_dir, name):
    expect_path = os.path.join(out_dir, name + "-expect.json")
    with open(expect_path, "w", encoding="utf-8") as f:
        json.dump(expect, f, indent=1)
    r = subprocess.run([sys.executable, os.path.join(source_dir, "ui", "check_dom.py"), dom_path, expect_path],
                       capture_output=True, text=True, timeout=60)
    print(r.stdout, end="")
    if r.returncode != 0:
        sys.exit(f"{name}: the page does not show what it should:\n{r.stdout}{r.stderr}")


def wait_for_line(log_path, pattern, what):
    deadline = time.time() + STEP_TIMEOUT
    while time.time() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            m = re.search(pattern, f.read())
        if m:
            return m.group(1)
        time.sleep(0.2)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        sys.exit(f"{what}: not seen in {STEP_TIMEOUT} s; log:\n{f.read()[-4000:]}")


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def live(source_dir, tessera, out_dir, browser):
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        try:
            server_log = os.path.join(out_dir, "serve-cluster.log")
            procs.append(subprocess.Popen([tessera, "serve-cluster", "config/examples/demo.yaml", "--port", "0",
                                           "--ui-port", "0"],
                                          cwd=source_dir, stdout=open(server_log, "w"), stderr=subprocess.STDOUT))
            server = wait_for_line(server_log, r"serving \S+ at (http://\S+)", "serve-cluster's URL")
            cluster_ui = wait_for_line(server_log, r"web UI on (http://\S+/)", "serve-cluster's UI address")
            kubeconfig = os.path.join(tmp, "kc")
            with open(kubeconfig, "w") as f:
                f.write("apiVersion: v1\nkind: Config\nclusters: [{name: l, cluster: {server: \"%s\"}}]\n"
                        "contexts: [{name: l, context: {cluster: l}}]\ncurrent-context: l\n" % server)
            daemon_log = os.path.join(out_dir, "tessera-run.log")
            procs.append(subprocess.Popen([tessera, "run", "--kubeconfig", kubeconfig, "--lease-namespace", "default",
                                           "--health-port", "0", "--ui-port", "0"],
                                          cwd=source_dir, stdout=open(daemon_log, "w"), stderr=subprocess.STDOUT))
            ui = wait_for_line(daemon_log, r"web UI on (http://\S+/)", "the daemon's UI address")
            req = urllib.request.Request(server + "/api/v1/namespaces/ml/pods", data=json.dumps(NOTEBOOK).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
            urllib.request.urlopen(req, timeout=10).read()
            # Until the state shows the notebook on a shared GPU and the sweep pending with a reason.
            deadline, state = time.time() + STEP_TIMEOUT, None
            while time.time() < deadline:
                state = get_json(ui + "api/v1/state")
                shared = [o["pod"] for n in state["nodes"] for g in n["gpus"] if g["kind"] == "shared"
                          for o in g["occupants"]]
                sweep = [j for j in state["jobs"] if j["namespace"] == "ml" and j["name"] == "sweep"]
                if "ml/notebook-ui" in shared and sweep and sweep[0]["reason"]:
                    break
                time.sleep(0.5)
            else:
                sys.exit("the scheduler did not place ml/notebook-ui on a shared GPU, or gave the sweep no "
                         f"reason, in {STEP_TIMEOUT} s; last state:\n{json.dumps(state)[:4000]}")
            node = next(n["name"] for n in state["nodes"] for g in n["gpus"] if g["kind"] == "shared"
                        for o in g["occupants"] if o["pod"] == "ml/notebook-ui")
            queues = {q["name"]: {"gpu": {"allocated": q["resources"]["gpu"]["allocated"],
                                          "fairShare": q["resources"]["gpu"]["fairShare"]}}
                      for q in state["queues"] if q["resources"]["gpu"]["allocated"] > 0}
            if not queues:
                sys.exit("no queue holds GPUs in the demo: " + json.dumps(state["queues"]))
            # serve-cluster's own UI: the embedded cluster, with the reasons the daemon wrote on pods.
            deadline = time.time() + STEP_TIMEOUT
            while time.time() < deadline:
                cluster = get_json(cluster_ui + "api/v1/state")
                sweep = [j for j in cluster["jobs"] if j["namespace"] == "ml" and j["name"] == "sweep"]
                if cluster["source"] == "serve-cluster" and sweep and "untolerated taint" in sweep[0]["reason"]:
                    break
                time.sleep(0.5)
            else:
                sys.exit("serve-cluster's UI does not show the sweep's reason: " + json.dumps(cluster)[:3000])
            dom = browse(browser, cluster_ui, out_dir, "ui-serve-cluster")
            check_dom(source_dir, dom, {"jobReasons": {"ml/sweep": "untolerated taint"}}, out_dir, "ui-serve-cluster")
            dom = browse(browser, ui, out_dir, "ui-live")
            check_dom(source_dir, dom, {"queues": queues, "jobReasons": {"ml/sweep": "untolerated taint"},
                                        "occupants": {node: ["ml/notebook-ui"]}}, out_dir, "ui-live")
        finally:
            for p in reversed(procs):
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()


def report(source_dir, tessera, out_dir, browser):
    page = os.path.join(out_dir, "fractional-report.html")
    r = subprocess.run([tessera, "simulate", "config/examples/fractional.yaml", "--html", page], cwd=source_dir,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or not os.path.exists(page):
        sys.exit(f"tessera simulate --html failed (exit {r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-2000:]}")
    dom = browse(browser, "file://" + os.path.abspath(page), out_dir, "ui-report")
    check_dom(source_dir, dom, {"report": {"status": "PASSED"},
                                "occupants": {"h100-1": ["team-a/notebook-ana", "team-a/notebook-bo"]}},
              out_dir, "ui-report")


def main():
    mode, source_dir, tessera, out_dir = sys.argv[1:5]
    os.makedirs(out_dir, exist_ok=True)
    browser = chromium()
    if not browser:
        print("SKIPPED: Chromium is not installed (scripts/install-deps.sh installs Debian's chromium)")
        sys.exit(77)
    {"live": live, "report": report}[mode](source_dir, tessera, out_dir, browser)
    print(f"ui {mode}: ok")


if __name__ == "__main__":
    main()
