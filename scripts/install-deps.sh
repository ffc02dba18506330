#!/usr/bin/env bash
# Installs what Tessera needs to build and test on Debian 12, and nothing else.
# Idempotent: when every package is already installed it does nothing (no apt-get update).
# Run as root (CI does); as another user it only reports what is missing.
set -euo pipefail

PACKAGES=(
  cmake
  g++
  make
  ccache
  nlohmann-json3-dev
  libyaml-cpp-dev
  catch2
  libboost-dev        # Asio and Beast (header-only; compiled once in src/cache/client/http)
  libssl-dev          # TLS to the API server
  prometheus-cpp-dev  # /metrics of tessera run (the core library only)
  python3-jsonschema  # test/deploy: the CRD schemas against the examples
  python3-yaml        # test/deploy: reading the manifests
)
# test/deploy renders deploy/ with `kubectl kustomize`: Debian's kubernetes-client, unless a
# kubectl is installed already (from another package, which owns /usr/bin/kubectl: the two
# cannot be installed together).
if ! command -v kubectl >/dev/null 2>&1; then
  PACKAGES+=(kubernetes-client)
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
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
echo "install-deps: done"
