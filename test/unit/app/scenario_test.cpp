// Scenario files: errors name the file, the object (or step) index and the field; `tessera check`
// prints what differed for each unmet expectation, ends with "N passed, M failed" and exits non-zero
// when anything failed; `tessera simulate` prints a timeline.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/app/run.h"
#include "tessera/app/scenario.h"
#include "tessera/app/snapshot.h"

namespace {

namespace fs = std::filesystem;
using tessera::app::checkCommand;
using tessera::app::runScenarioFile;
using tessera::app::simulateCommand;

/// A fresh directory under the system temp dir, removed with its contents at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tessera-scenario-test-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

const char* kNodeAndQueue = R"(
  - apiVersion: scheduling.tessera.dev/v1alpha1
    kind: Queue
    metadata: {name: default}
  - apiVersion: v1
    kind: Node
    metadata: {name: n1}
    status:
      allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "2"}
      conditions: [{type: Ready, status: "True"}]
)";

std::string podYaml(const std::string& name, const std::string& cpu = "1") {
  return "  - apiVersion: v1\n    kind: Pod\n    metadata: {name: " + name +
         ", namespace: default}\n    spec:\n      schedulerName: tessera\n"
         "      containers: [{name: c, image: busybox, resources: {requests: {cpu: \"" +
         cpu + "\"}}}]\n";
}

/// A scenario with the node, the queue and pod p; `tail` follows the objects.
std::string scenario(const std::string& name, const std::string& tail) {
  return "name: " + name + "\nobjects:" + kNodeAndQueue + podYaml("p") + tail;
}

/// The single load error of `text`, written as `file` in `dir`.
std::string loadError(const TempDir& dir, const std::string& file, const std::string& text) {
  const std::string path = dir.write(file, text);
  auto o = runScenarioFile(path);
  INFO(text);
  REQUIRE(o.loadError);
  REQUIRE_FALSE(o.passed());
  REQUIRE(o.failures.size() == 1);
  CHECK_THAT(o.failures[0], Catch::Contains(path));
  return o.failures[0];
}

std::string lastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}

}  // namespace

TEST_CASE("scenario file errors name the file, the position and the field", "[scenario]") {
  TempDir dir;
  SECTION("unknown top-level key") {
    const std::string e = loadError(dir, "top.yaml", scenario("x", "bogus: 1\n"));
    CHECK_THAT(e, Catch::Contains("bogus"));
    CHECK_THAT(e, Catch::Contains("unknown key"));
    CHECK_THAT(e, Catch::Contains("valid: name, description"));
  }
  SECTION("missing name") {
    const std::string e = loadError(dir, "noname.yaml", "objects: []\n");
    CHECK_THAT(e, Catch::Contains("name"));
    CHECK_THAT(e, Catch::Contains("required"));
  }
  SECTION("unknown kind at objects[3]") {
    const std::string e = loadError(
        dir, "kind.yaml",
        scenario("x", "  - {apiVersion: v1, kind: Service, metadata: {name: svc, namespace: default}}\n"));
    CHECK_THAT(e, Catch::Contains("objects[3]"));
    CHECK_THAT(e, Catch::Contains("Service"));
  }
  SECTION("a Pod with a bad quantity names the object and the field") {
    const std::string e = loadError(dir, "qty.yaml", scenario("x", podYaml("bad", "lots")));
    CHECK_THAT(e, Catch::Contains("objects[3]"));
    CHECK_THAT(e, Catch::Contains("Pod default/bad"));
    CHECK_THAT(e, Catch::Contains("spec.containers[0].resources.requests.cpu"));
  }
  SECTION("a field the API server does not know (read strictly): spec indented under metadata") {
    const std::string e = loadError(
        dir, "strict.yaml",
        scenario("x", "  - apiVersion: v1\n    kind: Node\n    metadata:\n      name: n1\n      spec: {unschedulable: true}\n"));
    CHECK_THAT(e, Catch::Contains("strict.yaml"));
    CHECK_THAT(e, Catch::Contains("objects[3]"));
    CHECK_THAT(e, Catch::Contains("Node n1: unknown field \"metadata.spec\""));
  }
  SECTION("a misplaced container key, and a misspelt Queue field by the CRD's schema") {
    std::string pod = podYaml("p2", "1");
    pod.replace(pod.find("resources:"), std::string("resources:").size(), "resource:");
    CHECK_THAT(loadError(dir, "pod.yaml", scenario("x", pod)),
               Catch::Contains("Pod default/p2: unknown field \"spec.containers[0].resource\""));
    CHECK_THAT(loadError(dir, "queue.yaml",
                         scenario("x", "  - {apiVersion: scheduling.tessera.dev/v1alpha1, kind: Queue, metadata: {name: "
                                       "q}, spec: {prority: 1, resources: {gpu: {quota: \"1\"}}}}\n")),
               Catch::Contains("Queue q: unknown field \"spec.prority\""));
  }
  SECTION("a manifest that is not a map") {
    const std::string e = loadError(dir, "scalar.yaml", scenario("x", "  - just-a-string\n"));
    CHECK_THAT(e, Catch::Contains("objects[3]"));
  }
  SECTION("a step with two keys") {
    const std::string e = loadError(dir, "step.yaml", scenario("x", "steps:\n  - cycles: 1\n  - {cycles: 1, advance: 1s}\n"));
    CHECK_THAT(e, Catch::Contains("steps[1]"));
    CHECK_THAT(e, Catch::Contains("exactly one key"));
  }
  SECTION("an unknown step") {
    const std::string e = loadError(dir, "wait.yaml", scenario("x", "steps:\n  - wait: 1\n"));
    CHECK_THAT(e, Catch::Contains("steps[0]"));
    CHECK_THAT(e, Catch::Contains("unknown step \"wait\""));
  }
  SECTION("an unknown expectation key") {
    const std::string e = loadError(dir, "expect.yaml", scenario("x", "expect:\n  boundd: {default/p: n1}\n"));
    CHECK_THAT(e, Catch::Contains("expect"));
    CHECK_THAT(e, Catch::Contains("unknown expectation \"boundd\""));
  }
  SECTION("an unknown expectation key inside a step") {
    const std::string e =
        loadError(dir, "stepexpect.yaml", scenario("x", "steps:\n  - cycles: 1\n  - expect: {pendng: [default/p]}\n"));
    CHECK_THAT(e, Catch::Contains("steps[1].expect"));
    CHECK_THAT(e, Catch::Contains("pendng"));
  }
  SECTION("a bad manifest in an apply step") {
    const std::string e = loadError(
        dir, "apply.yaml",
        scenario("x", "steps:\n  - cycles: 1\n  - apply:\n    - {apiVersion: v1, kind: Gadget, metadata: {name: g}}\n"));
    CHECK_THAT(e, Catch::Contains("steps[1].apply[0]"));
    CHECK_THAT(e, Catch::Contains("Gadget"));
  }
  SECTION("a bad advance") {
    const std::string e = loadError(dir, "advance.yaml", scenario("x", "steps:\n  - advance: soon\n"));
    CHECK_THAT(e, Catch::Contains("steps[0].advance"));
  }
  SECTION("a config error names the config field") {
    const std::string e =
        loadError(dir, "config.yaml", "config: {plugins: {nodeorder: {node: 5}}}\n" + scenario("x", ""));
    CHECK_THAT(e, Catch::Contains("config"));
    CHECK_THAT(e, Catch::Contains("plugins.nodeorder.node"));
  }
  SECTION("config.shard names a SchedulingShard that is not among the objects, or one with a bad spec") {
    CHECK_THAT(loadError(dir, "noshard.yaml", "config: {shard: gpu}\n" + scenario("x", "")),
               Catch::Contains("config.shard: SchedulingShard gpu not found"));
    const std::string e = loadError(
        dir, "badshard.yaml",
        scenario("x", "  - {apiVersion: scheduling.tessera.dev/v1alpha1, kind: SchedulingShard, metadata: {name: gpu}, "
                      "spec: {nodePool: 5}}\n"));
    CHECK_THAT(e, Catch::Contains("objects[3]"));
    CHECK_THAT(e, Catch::Contains("SchedulingShard gpu: spec.nodePool: must be a string"));
  }
    SECTION("YAML that does not parse") {
    const std::string e = loadError(dir, "broken.yaml", "name: x\nobjects: [\n");
    CHECK_FALSE(e.empty());
  }
}

TEST_CASE("check reports every unmet expectation and ends with the counts", "[scenario]") {
  TempDir dir;
  dir.write("a/pass-1.yaml", scenario("pass-1", "expect:\n  bound: {default/p: n1}\n"));
  dir.write("a/pass-2.yaml", scenario("pass-2", "steps:\n  - cycles: 2\n  - expect: {bound: {default/p: \"*\"}}\n"));
  dir.write("b/fail.yaml", "name: fail-1\nobjects:" + std::string(kNodeAndQueue) + podYaml("p") +
                               podYaml("huge", "64") +
                               "expect:\n  bound: {default/p: n2, default/huge: \"*\"}\n  pending: [default/p]\n"
                               "  unschedulableReason: {default/huge: \"nothing like this\"}\n");
  dir.write("b/notes.txt", "not a scenario");

  SECTION("a failing expectation: non-zero exit, what differed, and the counts") {
    std::ostringstream out;
    const int rc = checkCommand({dir.path.string()}, out);
    const std::string text = out.str();
    INFO(text);
    CHECK(rc != 0);
    CHECK(lastLine(text) == "2 passed, 1 failed");
    CHECK_THAT(text, Catch::Contains("ok   pass-1"));
    CHECK_THAT(text, Catch::Contains("FAIL fail-1"));
    // Scenario, key, expected and found, for each unmet expectation.
    CHECK_THAT(text, Catch::Contains("scenario fail-1: expect.bound: default/p: expected bound to n2, found bound to n1"));
    CHECK_THAT(text, Catch::Contains("scenario fail-1: expect.bound: default/huge: expected bound to *, found not bound"));
    CHECK_THAT(text, Catch::Contains("insufficient cpu"));  // the pending pod's reason is shown
    CHECK_THAT(text, Catch::Contains("scenario fail-1: expect.pending: default/p: expected pending, found bound to n1"));
    CHECK_THAT(text, Catch::Contains("scenario fail-1: expect.unschedulableReason: default/huge: expected a reason "
                                     "containing \"nothing like this\""));
  }
  SECTION("only passing files: exit 0") {
    std::ostringstream out;
    CHECK(checkCommand({(dir.path / "a").string()}, out) == 0);
    CHECK(lastLine(out.str()) == "2 passed, 0 failed");
  }
  SECTION("files and directories mix; a missing path is a failure") {
    std::ostringstream out;
    const int rc = checkCommand({(dir.path / "a" / "pass-1.yaml").string(), (dir.path / "nope").string()}, out);
    CHECK(rc != 0);
    CHECK(lastLine(out.str()) == "1 passed, 1 failed");
    CHECK_THAT(out.str(), Catch::Contains("nope"));
  }
  SECTION("a malformed file is a failure naming it") {
    const std::string bad = dir.write("c/bad.yaml", scenario("bad", "bogus: 1\n"));
    std::ostringstream out;
    CHECK(checkCommand({(dir.path / "c").string()}, out) != 0);
    CHECK(lastLine(out.str()) == "0 passed, 1 failed");
    CHECK_THAT(out.str(), Catch::Contains(bad));
  }
  SECTION("no arguments is a usage error") {
    std::ostringstream out;
    CHECK(checkCommand({}, out) != 0);
  }
}

TEST_CASE("a scenario's outcome counts its expectations", "[scenario]") {
  TempDir dir;
  const std::string path =
      dir.write("ok.yaml", scenario("counted", "steps:\n  - cycles: 1\n  - expect: {bound: {default/p: n1}, "
                                               "boundCount: {\"app notin (x)\": 1}}\n  - expect: {pending: []}\n"));
  auto o = runScenarioFile(path);
  CHECK(o.passed());
  CHECK(o.name == "counted");
  CHECK(o.expectationsChecked == 3);
}

TEST_CASE("simulate prints a timeline", "[scenario]") {
  TempDir dir;
  const std::string path = dir.write(
      "sim.yaml", "name: sim\nobjects:" + std::string(kNodeAndQueue) + podYaml("p") + podYaml("huge", "64") +
                      "steps:\n  - cycles: 1\n  - complete: [default/p]\n  - advance: 90s\n  - cycles: 1\n");
  std::ostringstream out;
  CHECK(simulateCommand({path}, out) == 0);
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("cycle 1"));
  CHECK_THAT(text, Catch::Contains("bind      default/p -> n1"));
  CHECK_THAT(text, Catch::Contains("pending   default/huge: pod unschedulable: insufficient cpu"));
  CHECK_THAT(text, Catch::Contains("complete default/p"));
  CHECK_THAT(text, Catch::Contains("advance 90s"));
  CHECK_THAT(text, Catch::Contains("cycle 2"));
}

TEST_CASE("every subcommand prints its usage on stdout and exits 0 for --help, wherever it stands") {
  using Command = std::function<int(const std::vector<std::string>&, std::ostream&, std::ostream&)>;
  const std::vector<std::pair<std::string, Command>> commands = {
      {"check", [](const auto& a, std::ostream& o, std::ostream&) { return tessera::app::checkCommand(a, o); }},
      {"simulate", [](const auto& a, std::ostream& o, std::ostream&) { return tessera::app::simulateCommand(a, o); }},
      {"serve-cluster", tessera::app::serveClusterCommand},
      {"run", tessera::app::runCommand},
      {"snapshot", tessera::app::snapshotCommand},
  };
  for (const auto& [name, command] : commands)
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--help"}, {"-h"}, {"some-file.yaml", "--help"}}) {
      INFO(name << " " << args.front());
      std::ostringstream out, err;
      CHECK(command(args, out, err) == 0);
      CHECK(out.str().rfind("usage: tessera " + name, 0) == 0);
      CHECK(err.str().empty());
    }
}
