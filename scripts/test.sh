#!/usr/bin/env bash
# The test command: installs what is missing, then checks formatting, the
# allocator's ground rules, builds everything (benchmarks included) and runs
# every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== format" >&2
cargo fmt --all -- --check

echo "== ground rules" >&2
# Only the OS layer of the allocator crates calls libc.
stray=$(grep -rln 'libc::' alloc-core/src alloc-global/src | grep -v '/os/' || true)
if [ -n "$stray" ]; then
  echo "libc:: used outside alloc-core/src/os/: $stray" >&2
  exit 1
fi

bash scripts/check-control-deps.sh

echo "== clippy" >&2
cargo clippy --workspace --all-targets --all-features -- -D warnings

echo "== tests" >&2
cargo test --workspace --all-features --no-fail-fast

echo "== the per-thread fallback: the same integration and stress tests without rseq" >&2
# glibc registers no rseq area with this tunable, as under valgrind or rr:
# the engine must run its per-thread sheaves, and everything must hold.
GLIBC_TUNABLES=glibc.pthread.rseq=0 SHEAFALLOC_STRESS_SECS=15 SHEAFALLOC_TORTURE_SECS=8 \
  cargo test -p sheafalloc --all-features --no-fail-fast

echo "== the shipped configuration: release build, default features (no checks)" >&2
# What users run: optimised, fat LTO, no debug assertions, no misuse checks.
SHEAFALLOC_STRESS_SECS=20 SHEAFALLOC_TORTURE_SECS=10 \
  cargo test --release -p sheafalloc \
  --test stress_cross_thread --test torture --test soak --test fork_exits

bash scripts/check-fastpath-budget.sh  # instructions per alloc+free pair vs bench/budget.toml
echo "== loom models" >&2
bash scripts/loom.sh

echo "== examples: the demo, end to end, briefly" >&2
cargo build -q -p sheafalloc-examples --bins
target/debug/demo 2 200
target/debug/udp_echo 1

if [ -f scripts/check-prometheus.sh ]; then
  echo "== prometheus" >&2
  bash scripts/check-prometheus.sh
fi
