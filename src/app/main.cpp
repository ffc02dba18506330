// tessera: the scheduler's command line. Subcommands: simulate, check (the embedded cluster), run
// (a real API server), snapshot (a real cluster as a scenario file), serve-cluster, webhook
// (admission), reserve (GPU reservation pods), monitor (the node agent of hard isolation).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tessera/api/malloc_tuning.h"
#include "tessera/api/version.h"
#include "tessera/app/run.h"
#include "tessera/app/scenario.h"
#include "tessera/app/snapshot.h"
#include "tessera/monitor/monitor.h"
#include "tessera/reserve/reserve.h"
#include "tessera/webhook/server.h"

namespace {

void usage(std::ostream& out) {
  out << "usage: tessera COMMAND [ARGS]\n"
         "\n"
         "commands:\n"
         "  simulate FILE        run a scenario on the embedded cluster and print its timeline\n"
         "  check FILE|DIR...    run scenario files and check their expectations\n"
         "  run FLAGS            schedule against a Kubernetes API server (tessera run --help)\n"
         "  snapshot FLAGS       a cluster's scheduling inputs as a scenario file (tessera snapshot --help)\n"
         "  serve-cluster FILE   serve a scenario's cluster over HTTP (a test API server)\n"
         "  webhook FLAGS        the admission webhook for fractional GPU pods (tessera webhook --help)\n"
         "  reserve [FLAGS]      the process of a GPU reservation pod (tessera reserve --help)\n"
         "  monitor [FLAGS]      per-pod GPU memory metrics on a GPU node (tessera monitor --help)\n"
         "  version              print the version\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "simulate") return tessera::app::simulateCommand(args, std::cout);
  if (cmd == "check") return tessera::app::checkCommand(args, std::cout);
  // The long-running schedulers keep the memory a cycle frees for the next one, in huge pages
  // (malloc_tuning.h; useHugePages re-executes the process first, when it does).
  if (cmd == "run" || cmd == "serve-cluster") {
    tessera::api::useHugePages(argv);
    (void)tessera::api::tuneMalloc(tessera::api::MallocMode::Keep);
  }
  if (cmd == "run") return tessera::app::runCommand(args, std::cout, std::cerr);
  if (cmd == "snapshot") return tessera::app::snapshotCommand(args, std::cout, std::cerr);
  if (cmd == "serve-cluster") return tessera::app::serveClusterCommand(args, std::cout, std::cerr);
  if (cmd == "webhook") return tessera::webhook::webhookCommand(args, std::cout, std::cerr);
  if (cmd == "reserve") return tessera::reserve::reserveCommand(args, std::cout, std::cerr);
  if (cmd == "monitor") return tessera::monitor::monitorCommand(args, std::cout, std::cerr);
  if (cmd == "version" || cmd == "--version") {
    std::cout << "tessera " << tessera::api::buildVersion() << " (commit " << tessera::api::buildCommit() << ")\n";
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    usage(std::cout);
    return 0;
  }
  std::cerr << "tessera: unknown command \"" << cmd << "\"\n";
  usage(std::cerr);
  return 2;
}
