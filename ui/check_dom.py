#!/usr/bin/env python3
"""Check a `chromium --dump-dom` of the Tessera UI against expectations.

usage: check_dom.py DOM.html EXPECT.json

EXPECT.json (every key optional):
  {
    "queues":     {"team-a": {"gpu": {"allocated": 3, "fairShare": 3.5}, "memory": null}},
                  # numbers compared with the bar's data-* attributes (camelCase key -> data-kebab-case);
                  # allocated/fairShare must also appear in the bar's text; null: the row must be absent
    "jobReasons": {"ns/name": "substring"},     # row tr.job[data-job] whose td.reason contains the substring
    "jobStatus":  {"ns/name": "pending"},       # tr.job[data-status]
    "occupants":  {"node": ["ns/pod", ...]},    # .occupant[data-pod] inside .node[data-node]
    "gpuKinds":   {"node": {"whole": 2, "free": 3}},   # count of .gpu[data-kind] in the node
    "cycle":      12,                           # body[data-cycle]
    "cycles":     [10, 11, 12],                 # tr.cycle[data-cycle] present in #cycles
    "report":     {"status": "PASSED", "expectations": 2, "failed": 1}
  }
Always checked: body[data-rendered="true"].
Exits 0 when everything holds; otherwise prints one line per miss and exits 1 (2 on bad usage).
Standard library only.
"""
import json
import re
import sys
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class El:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.kids = tag, dict(attrs), parent, []

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(k if isinstance(k, str) else k.text() for k in self.kids)

    def walk(self):
        for k in self.kids:
            if isinstance(k, El):
                yield k
                yield from k.walk()

    def find(self, cls=None, tag=None, **attrs):
        """Descendants with the class / tag / attributes (attribute names with '_' for '-')."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        for e in self.walk():
            if cls and cls not in e.classes():
                continue
            if tag and e.tag != tag:
                continue
            if all(e.attrs.get(k) == v for k, v in want.items()):
                yield e


class Tree(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = El("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        el = El(tag, [(k, v if v is not None else "") for k, v in attrs], self.cur)
        self.cur.kids.append(el)
        if tag not in VOID:
            self.cur = el

    def handle_startendtag(self, tag, attrs):
        self.cur.kids.append(El(tag, [(k, v if v is not None else "") for k, v in attrs], self.cur))

    def handle_endtag(self, tag):
        e = self.cur
        while e is not None and e.tag != tag:
            e = e.parent
        if e is not None and e.parent is not None:  # close up to the matching open tag; ignore strays
            self.cur = e.parent

    def handle_data(self, data):
        self.cur.kids.append(data)


def kebab(name):
    return "data-" + re.sub(r"([A-Z])", lambda m: "-" + m.group(1).lower(), name)


def num_text(v):
    """How the page prints a number >= 0: at most 3 decimals, no trailing zeros (-1 prints as a dash)."""
    r = round(float(v), 3)
    return str(int(r)) if r == int(r) else repr(r)


def check(root, exp):
    miss = []
    bodies = list(root.find(tag="body"))
    body = bodies[0] if bodies else root
    if body.attrs.get("data-rendered") != "true":
        miss.append('body lacks data-rendered="true"')
    if "cycle" in exp and body.attrs.get("data-cycle") != str(exp["cycle"]):
        miss.append("body data-cycle=%r, expected %r" % (body.attrs.get("data-cycle"), str(exp["cycle"])))

    for q, resources in (exp.get("queues") or {}).items():
        boxes = list(root.find("queue", data_queue=q))
        if not boxes:
            miss.append("queue %s: no .queue[data-queue]" % q)
            continue
        for res, want in (resources or {}).items():
            bars = list(boxes[0].find("bar", data_resource=res))
            if want is None:
                if bars:
                    miss.append("queue %s: %s bar shown, expected none" % (q, res))
                continue
            if not bars:
                miss.append("queue %s: no .bar[data-resource=%s]" % (q, res))
                continue
            bar, text = bars[0], bars[0].text()
            for key, val in want.items():
                got = bar.attrs.get(kebab(key))
                try:
                    ok = got is not None and abs(float(got) - float(val)) < 1e-9
                except ValueError:
                    ok = False
                if not ok:
                    miss.append("queue %s %s: %s=%r, expected %r" % (q, res, kebab(key), got, val))
                elif key in ("allocated", "fairShare") and float(val) >= 0 and num_text(val) not in text:
                    miss.append("queue %s %s: text %r lacks %s %s" % (q, res, text.strip(), key, num_text(val)))

    rows = {r.attrs.get("data-job"): r for r in root.find("job", tag="tr")}
    for job, sub in (exp.get("jobReasons") or {}).items():
        row = rows.get(job)
        if row is None:
            miss.append("job %s: no tr.job[data-job]" % job)
            continue
        cells = list(row.find("reason", tag="td"))
        if not cells:
            miss.append("job %s: no td.reason" % job)
        elif sub not in cells[0].text():
            miss.append("job %s: reason %r lacks %r" % (job, cells[0].text(), sub))
    for job, status in (exp.get("jobStatus") or {}).items():
        row = rows.get(job)
        got = row.attrs.get("data-status") if row is not None else None
        if got != status:
            miss.append("job %s: status %r, expected %r" % (job, got, status))

    for node, pods in (exp.get("occupants") or {}).items():
        els = list(root.find("node", data_node=node))
        if not els:
            miss.append("node %s: no .node[data-node]" % node)
            continue
        have = {o.attrs.get("data-pod") for o in els[0].find("occupant")}
        for p in pods:
            if p not in have:
                miss.append("node %s: no .occupant[data-pod=%s] (has %s)" % (node, p, sorted(x for x in have if x)))
    for node, kinds in (exp.get("gpuKinds") or {}).items():
        els = list(root.find("node", data_node=node))
        if not els:
            miss.append("node %s: no .node[data-node]" % node)
            continue
        for kind, n in kinds.items():
            got = len(list(els[0].find("gpu", data_kind=kind)))
            if got != n:
                miss.append("node %s: %d GPUs of kind %s, expected %d" % (node, got, kind, n))

    if "cycles" in exp:
        tables = list(root.find(tag="table", id="cycles"))
        have = {r.attrs.get("data-cycle") for r in tables[0].find("cycle", tag="tr")} if tables else set()
        if not tables:
            miss.append("no table#cycles")
        for c in exp["cycles"]:
            if str(c) not in have:
                miss.append("cycles: no tr.cycle for cycle %s" % c)

    rep = exp.get("report")
    if rep:
        if not list(root.find(id="cycle-slider")):
            miss.append("report: no #cycle-slider")
        st = list(root.find(id="report-status"))
        if "status" in rep and (not st or rep["status"] not in st[0].text()):
            miss.append("report: #report-status %r, expected %r" % (st[0].text() if st else None, rep["status"]))
        items = list(root.find("expectation"))
        if "expectations" in rep and len(items) != rep["expectations"]:
            miss.append("report: %d .expectation items, expected %d" % (len(items), rep["expectations"]))
        failed = sum(1 for i in items if i.attrs.get("data-ok") == "false")
        if "failed" in rep and failed != rep["failed"]:
            miss.append("report: %d failed expectations, expected %d" % (failed, rep["failed"]))
    return miss


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        tree = Tree()
        tree.feed(f.read())
        tree.close()
    with open(argv[2], encoding="utf-8") as f:
        exp = json.load(f)
    miss = check(tree.root, exp)
    for m in miss:
        print("MISS: " + m)
    if not miss:
        print("ok: all expectations hold")
    return 1 if miss else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
