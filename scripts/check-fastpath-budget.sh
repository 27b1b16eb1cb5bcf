#!/usr/bin/env bash
# The fast-path instruction budget (what CI checks): builds the
# sheafalloc-only `fastpath-budget` binary (release profile, fat LTO, without
# the peer allocators) and counts one alloc+free pair per entry of
# bench/budget.toml under valgrind's callgrind. Fails when a count exceeds
# its budget, printing measured against budget. Needs valgrind
# (scripts/setup.sh installs it). `--build-only` builds the binary and
# stops (the test command builds it ahead, in the background).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sheafalloc-bench --no-default-features --bin fastpath-budget
[ "${1:-}" = "--build-only" ] && exit 0
echo "== fast-path instruction budget (callgrind)" >&2
target/release/fastpath-budget check bench/budget.toml
