#!/usr/bin/env python3
"""Build a sample report page from sample-state.json, the way `tessera simulate --html` does.

Replaces the `<!--TESSERA_REPORT-->` line of index.html with
`<script>window.TESSERA_REPORT = {...};</script>` and writes the page to
/tmp/ui-check/sample-report.html (or the path given as the first argument).
"""
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MARKER = "<!--TESSERA_REPORT-->"


def script_json(obj):
    # Safe inside <script>: no "</script>", "<!--" or "&" can appear in the JSON text.
    return (json.dumps(obj, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ui-check/sample-report.html"
    with open(os.path.join(HERE, "sample-state.json"), encoding="utf-8") as f:
        base = json.load(f)
    with open(os.path.join(HERE, "index.html"), encoding="utf-8") as f:
        page = f.read()
    if page.count(MARKER) != 1:
        sys.exit("index.html must contain the marker exactly once")

    base["source"] = "simulate"
    states = []
    for i, cycle in enumerate((10, 11, 12)):
        st = copy.deepcopy(base)
        st["cycle"] = cycle
        st["now"] = "2026-11-27T03:39:%02dZ" % (58 + i) if cycle < 12 else "2026-11-27T03:40:00Z"
        st["cycles"] = [c for c in base["cycles"] if c["cycle"] <= cycle]
        node = st["nodes"][0]
        if cycle == 10:
            # before the reclaim: nb-2 holds its share normally, infer-4 not yet pipelined
            node["gpus"][2]["occupants"][1]["releasing"] = False
            st["jobs"] = [j for j in st["jobs"] if j["name"] != "infer-4"]
        if cycle < 12:
            for j in st["jobs"]:
                j["ageSeconds"] = max(0, j["ageSeconds"] - (12 - cycle))
        if cycle == 12:
            st["queues"][0]["resources"]["gpu"]["allocated"] = 4.5
        states.append(st)

    report = {
        "scenario": "sample-gpushare-reclaim",
        "description": "team-b reclaims a quarter GPU from research/nb-2 for team-b/infer-4 <sample & test>.",
        "passed": False,
        "states": states,
        "timeline": [
            ["cycle 10 @ 2026-11-27T03:39:58Z", "  bind  team-a/train-0 -> gpu-a1", "  bind  team-a/train-1 -> gpu-a1",
             "  bind  team-a/finetune-0 -> gpu-a2", "  bind  team-a/finetune-1 -> gpu-a2"],
            ["cycle 11 @ 2026-11-27T03:39:59Z", "  evict research/nb-2 on gpu-a1: reclaimed by queue team-b for pod team-b/infer-4",
             "  pipeline team-b/infer-4 -> gpu-a1 (shared g-1a2b)"],
            ["cycle 12 @ 2026-11-27T03:40:00Z", "  (no binds)", "  pending research/big-sweep: gang unschedulable"],
        ],
        "expectations": [
            {"state": 1, "ok": True, "text": "steps[1].expect.evicted: research/nb-2 evicted from gpu-a1"},
            {"state": 2, "ok": False, "text": "steps[2].expect.bound: team-b/infer-4: expected bound to gpu-a1, found pipelined"},
        ],
    }
    tag = "<script>window.TESSERA_REPORT = %s;</script>" % script_json(report)
    lines = [tag if line.strip() == MARKER else line for line in page.split("\n")]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(out)


if __name__ == "__main__":
    main()
