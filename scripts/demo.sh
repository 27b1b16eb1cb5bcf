#!/usr/bin/env bash
# The demo command: installs what is missing, builds the example programs in
# release, and runs the demo (the same service with sheafalloc and with the
# system allocator, side by side, about 25 seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release -q -p sheafalloc-examples --bins
exec target/release/demo "$@"
