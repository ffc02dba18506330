// `tessera webhook`: flags -> Server, then wait for SIGTERM/SIGINT (sigwait on a blocked set: no
// signal handler, no Asio signal_set needed).
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <pthread.h>

#include "tessera/api/flags.h"
#include "tessera/api/signals.h"
#include "tessera/webhook/server.h"

namespace tessera::webhook {

namespace {

const char* const kUsage =
    "usage: tessera webhook --tls-cert-file FILE --tls-key-file FILE [--port 9443] [--address 0.0.0.0]\n"
    "                       [--isolation hard|mps|none] [--interposer-path /usr/local/tessera/lib]\n"
    "                       [--interposer-source init-container|host-path]\n"
    "                       [--interposer-image ghcr.io/tessera-sched/tessera-interposer:latest]\n"
    "  --interposer-image defaults to $TESSERA_INTERPOSER_IMAGE when set.\n"
    "                       [--scheduler-name tessera] [--mps-pipe-directory /tmp/nvidia-mps]\n";

api::Result<ServerOptions> parseFlags(const std::vector<std::string>& args) {
  ServerOptions o;
  // The default of --interposer-image: deploy/ sets it from the interposer DaemonSet's image
  // (kustomize replacements select an env entry by name, not a flag by position).
  if (const char* image = std::getenv("TESSERA_INTERPOSER_IMAGE"); image != nullptr && *image != '\0')
    o.admission.interposerImage = image;
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    if (a == "--help" || a == "-h") return api::makeError("", 1);
    TESSERA_ASSIGN_OR_RETURN(const std::string v, flag.value());
    if (a == "--tls-cert-file") o.certFile = v;
    else if (a == "--tls-key-file") o.keyFile = v;
    else if (a == "--address") o.address = v;
    else if (a == "--port") {
      char* end = nullptr;
      const long p = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || p < 0 || p > 65535)
        return api::makeError("--port: \"" + v + "\" is not a port number");
      o.port = static_cast<uint16_t>(p);
    } else if (a == "--isolation") {
      if (v == "hard") o.admission.isolation = api::Isolation::Hard;
      else if (v == "mps") o.admission.isolation = api::Isolation::Mps;
      else if (v == "none") o.admission.isolation = api::Isolation::None;
      else return api::makeError("--isolation: \"" + v + "\" is not a backend (valid: hard, mps, none)");
    } else if (a == "--interposer-path") {
      if (v.empty() || v[0] != '/') return api::makeError("--interposer-path: \"" + v + "\" must be an absolute path");
      o.admission.interposerDir = v;
    } else if (a == "--interposer-source") {
      if (v == "init-container") o.admission.interposerSource = InterposerSource::InitContainer;
      else if (v == "host-path") o.admission.interposerSource = InterposerSource::HostPath;
      else
        return api::makeError("--interposer-source: \"" + v + "\" is not a source (valid: init-container, host-path)");
    } else if (a == "--interposer-image") {
      if (v.empty() || v.find_first_of(" \t\n") != std::string::npos)
        return api::makeError("--interposer-image: \"" + v + "\" is not an image reference");
      o.admission.interposerImage = v;
    } else if (a == "--mps-pipe-directory") {
      if (v.empty() || v[0] != '/')
        return api::makeError("--mps-pipe-directory: \"" + v + "\" must be an absolute path");
      o.admission.mpsPipeDir = v;
    } else if (a == "--scheduler-name") {
      if (v.empty()) return api::makeError("--scheduler-name: must not be empty");
      o.admission.schedulerName = v;
    } else {
      return api::makeError("unknown flag " + a);
    }
  }
  if (o.certFile.empty() || o.keyFile.empty()) return api::makeError("--tls-cert-file and --tls-key-file are required");
  return o;
}

}  // namespace

int webhookCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = parseFlags(args);
  if (!flags.ok()) {
    if (flags.error().code == 1) {
      out << kUsage;
      return 0;
    }
    err << "tessera webhook: " << flags.error().message << "\n" << kUsage;
    return 2;
  }
  // Block the termination signals before any thread starts; this thread takes them with sigwait.
  api::blockTerminationSignals();

  ServerOptions options = std::move(flags).value();
  options.log = [&err](const std::string& line) { err << "tessera webhook: " << line << "\n" << std::flush; };
  Server server(options);
  auto port = server.start();
  if (!port.ok()) {
    err << "tessera webhook: " << port.error().message << "\n";
    return 1;
  }
  const char* backend = options.admission.isolation == api::Isolation::Hard  ? "hard"
                        : options.admission.isolation == api::Isolation::Mps ? "mps"
                                                                             : "none";
  out << "tessera webhook: serving https://" << options.address << ":" << *port
      << " (/mutate, /validate, /healthz); scheduler " << options.admission.schedulerName << ", isolation " << backend
      << (options.admission.isolation != api::Isolation::Hard ? ""
          : options.admission.interposerSource == InterposerSource::HostPath
              ? " (interposer from the node's " + options.admission.interposerDir + ")"
              : " (interposer copied from " + options.admission.interposerImage + ")")
      << "\n"
      << std::flush;
  const int sig = api::waitForTerminationSignal();
  out << "tessera webhook: signal " << sig << ", stopping\n" << std::flush;
  server.stop();
  return 0;
}

}  // namespace tessera::webhook
