#!/usr/bin/env bash
# Installs the system packages the workspace needs, once, on a fresh Debian
# machine: hwloc (topology), libudev and pkg-config (hwlocality's build),
# Prometheus and promtool (the metrics checks), cmake (snmalloc's build in
# the benchmarks), valgrind (instruction counts), curl (the Prometheus
# check). Re-running is cheap: it
# only installs what is missing.
set -euo pipefail

packages=(libhwloc-dev libudev-dev pkg-config prometheus cmake valgrind curl)
packages+=(chromium chromium-driver fonts-dejavu-core) # the control page's browser test (headless, WebDriver)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
