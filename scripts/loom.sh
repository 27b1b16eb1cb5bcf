#!/usr/bin/env bash
# Runs the loom concurrency models of the engine (alloc-core/tests/loom.rs).
# `--cfg loom` reaches every crate of the build, so the build gets a target
# folder of its own and the normal build's cache stays valid. Arguments go to
# the test binary, e.g. `scripts/loom.sh -- --nocapture` prints how many
# executions each model explored; LOOM_MAX_PREEMPTIONS overrides the models'
# preemption bounds.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p sheafalloc-core --release --test loom "$@"
