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

# The optimised builds of the later steps (the shipped configuration's
# tests, the instruction budget's binary, the loom models) compile in the
# background while the debug tests run: most of those tests run for a set
# time, so the compiler takes cores they would leave idle, not their
# checks. Its output goes to target/prebuild.log, shown if it fails.
mkdir -p target
RELEASE_TESTS=(--test stress_cross_thread --test torture --test soak --test fork_exits)
# In a session of its own (`setsid`), so that if a step fails the whole
# build — cargo and every compiler it started — stops with the script
# instead of compiling on after it.
setsid bash -c 'cargo test -q --release -p sheafalloc "$@" --no-run &&
    bash scripts/check-fastpath-budget.sh --build-only &&
    bash scripts/loom.sh --no-run' prebuild "${RELEASE_TESTS[@]}" >target/prebuild.log 2>&1 &
prebuild=$!
trap 'kill -- "-$prebuild" 2>/dev/null || true' EXIT

echo "== tests" >&2
# One build configuration (the workspace, every feature) for the tests and
# for every binary the later steps run: a `-p` build would resolve features
# anew and compile the dependencies a second time.
cargo build -q --workspace --all-features --bins --examples
cargo test --workspace --all-features --no-fail-fast

echo "== the per-thread fallback: the same integration and stress tests without rseq" >&2
# glibc registers no rseq area with this tunable, as under valgrind or rr:
# the engine must run its per-thread sheaves, and everything must hold.
# The test binaries of `sheafalloc` just built, run again (as cargo runs
# them: from the package's folder); every one runs even if one fails.
binaries=$(cargo test --workspace --all-features --no-run --message-format=json 2>/dev/null |
  python3 scripts/test-executables.py alloc-global/Cargo.toml)
[ -n "$binaries" ] || { echo "no test binaries of sheafalloc found" >&2; exit 1; }
failed=()
for binary in $binaries; do
  echo "   running $(basename "$binary") without rseq" >&2
  (cd alloc-global && GLIBC_TUNABLES=glibc.pthread.rseq=0 SHEAFALLOC_STRESS_SECS=8 \
    SHEAFALLOC_TORTURE_SECS=6 "$binary") || failed+=("$(basename "$binary")")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "without rseq, failed: ${failed[*]}" >&2
  exit 1
fi

if ! wait "$prebuild"; then
  cat target/prebuild.log >&2
  echo "the optimised builds failed (above)" >&2
  exit 1
fi

echo "== the shipped configuration: release build, default features (no checks)" >&2
# What users run: optimised, fat LTO, no debug assertions, no misuse checks.
SHEAFALLOC_STRESS_SECS=15 SHEAFALLOC_TORTURE_SECS=8 \
  cargo test --release -p sheafalloc "${RELEASE_TESTS[@]}"

bash scripts/check-fastpath-budget.sh  # instructions per alloc+free pair vs bench/budget.toml
echo "== loom models" >&2
bash scripts/loom.sh

echo "== examples: the demo, end to end, briefly" >&2
target/debug/demo 2 200
target/debug/udp_echo 1

if [ -f scripts/check-prometheus.sh ]; then
  echo "== prometheus" >&2
  bash scripts/check-prometheus.sh
fi
