#!/usr/bin/env bash
# The benchmark suite: installs what the workspace and the benchmarks need
# (scripts/setup.sh, plus wrk, the HTTP load generator), builds every binary
# of sheafalloc-bench in release, and runs the network-service suite with
# the arguments given (e.g. `bash scripts/bench.sh --quick`). Results go to
# bench/results/; `target/release/sheafalloc-bench report` regenerates the
# report and the README tables from them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v wrk >/dev/null 2>&1; then
  echo "bench: installing wrk" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
cargo build --release -p sheafalloc-bench
target/release/sheafalloc-bench suite "$@"
