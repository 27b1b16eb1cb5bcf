#!/usr/bin/env bash
# The long soak (not part of CI): the shipped configuration (release build,
# default features) under hours-long loads, every object verified.
#
#   bash scripts/soak.sh            # 2 x 10^9 operations over 16 threads
#   OPS=10000000000 THREADS=32 bash scripts/soak.sh
#   MINUTES=30 bash scripts/soak.sh # also the content-pattern stress and the
#                                   # torture, MINUTES each
#
# Prints each run's rate; any lost, duplicated or corrupted object fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=${OPS:-2000000000}
THREADS=${THREADS:-16}
echo "== soak: $OPS operations over $THREADS threads (release)" >&2
SHEAFALLOC_SOAK_OPS=$OPS SHEAFALLOC_SOAK_THREADS=$THREADS \
  cargo test --release -p sheafalloc --test soak
if [ -n "${MINUTES:-}" ]; then
  secs=$((MINUTES * 60))
  echo "== cross-thread stress with full content patterns: $MINUTES min, 8 threads" >&2
  SHEAFALLOC_STRESS_THREADS=8 SHEAFALLOC_STRESS_SECS=$secs \
    cargo test --release -p sheafalloc --test stress_cross_thread -- --nocapture
  echo "== torture: $MINUTES min on the real topology and on 4 simulated nodes" >&2
  SHEAFALLOC_TORTURE_SECS=$secs cargo test --release -p sheafalloc --test torture
fi
