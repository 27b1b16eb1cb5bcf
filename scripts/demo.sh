#!/usr/bin/env bash
# The demo command: installs what is missing, builds in release, runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec cargo run --release -q -p sheafalloc-examples --bin demo -- "$@"
