#!/usr/bin/env bash
# Where each allocator's HTTP service spends its CPU, per request.
#
#   bash bench/profile-per-request.sh [WORKLOAD] [ROUNDS] [SECONDS]
#   (defaults: http-catalog 3 4; run from the repository root after
#   `cargo build --release -p sheafalloc-bench`)
#
# Each round runs `target/release/wl-ALLOCATOR WORKLOAD --seconds S` for
# sheafalloc (per-CPU sheaves; and per-thread, as sheafalloc-per-thread),
# snmalloc, mimalloc and jemalloc under
# `perf record -e cpu-clock` (the order rotated by one each round), and
# divides the server's worker samples by the requests it served in that
# run. Throughput on this host moves with where the vCPUs are; CPU samples
# per request move much less, so they say what an allocator costs a
# service. Samples are split into: kernel, memcpy/memmove (glibc), the
# allocator (its out-of-line symbols, and for sheafalloc the source files
# its fast path inlines into callers), and the rest of user space (the
# handlers, serde, tokio, hyper). Writes bench/results/profile-WORKLOAD.md.
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-http-catalog}
rounds=${2:-3}
seconds=${3:-4}
# `sheafalloc-per-thread` is wl-sheafalloc with SHEAFALLOC_PERCPU=off: its
# per-thread sheaves, measured in the same rounds as its default per-CPU
# sheaves, so the two modes are compared in one host state.
allocators=(sheafalloc sheafalloc-per-thread snmalloc mimalloc jemalloc)
# SHEAFALLOC_BASELINE=PATH adds `sheafalloc-baseline`: another build of
# wl-sheafalloc (say, the previous commit's), per-CPU, in the same rounds,
# to weigh a change; its report then gets its own name.
baseline=${SHEAFALLOC_BASELINE:-}
[ -n "$baseline" ] && allocators+=(sheafalloc-baseline)
bin=target/release
out=bench/results/profile-$workload${baseline:+-baseline}.md
binary() { if [ "$1" = sheafalloc-baseline ]; then echo "$baseline"; else echo "$bin/wl-${1%-per-thread}"; fi; }
mode_env() { if [ "$1" = sheafalloc-per-thread ]; then echo SHEAFALLOC_PERCPU=off; else echo SHEAFALLOC_PERCPU=on; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 2; }
for a in "${allocators[@]}"; do
  [ -x "$(binary "$a")" ] || { echo "$(binary "$a") missing: cargo build --release -p sheafalloc-bench" >&2; exit 2; }
done

# classify DATA OPS KEYS: prints "worker kernel memcpy allocator rest" per
# 1000 requests. KEYS is `sym,srcfile` for sheafalloc, whose fast path is
# inlined into its callers and only shows by source file (slow: perf
# resolves the source of every sample), `sym` for the peers.
classify() {
  perf report -i "$1" --no-children --comm tokio-rt-worker --sort "$3" \
    -F "sample,$3" 2>/dev/null | grep -v '^#' | grep . |
  awk -v ops="$2" '
    { n = $1; total += n; src = $NF
      if ($0 ~ /\[k\]/) { kernel += n; next }
      if ($0 ~ /memmove|memcpy/) { copy += n; next }
      if ($0 ~ /snmalloc|sn_rust|[^a-z]mi_|_mi_|je_|_rjem_|jemalloc|__rust_alloc|__rust_dealloc|__rust_realloc|sheafalloc::|sheafalloc_core::/) { alloc += n; next }
      if (src ~ /^(cs|sheaves|size_class|slow|barn|exchange|slab|arena|sheaf|remote|life_cycle|counters)\.rs$/) { alloc += n; next }
    }
    END { if (ops == 0) exit 1
          printf "%.1f %.1f %.1f %.1f %.1f\n", total / ops * 1000, kernel / ops * 1000,
                 copy / ops * 1000, alloc / ops * 1000, (total - kernel - copy - alloc) / ops * 1000 }'
}

rows=$tmp/rows
: > "$rows"
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#allocators[@]}; i++)); do
    a=${allocators[$(((i + r) % ${#allocators[@]}))]}
    result=$(env "$(mode_env "$a")" perf record -q -e cpu-clock -o "$tmp/perf.data" "$(binary "$a")" "$workload" \
      --seconds "$seconds" 2>"$tmp/stderr" | grep '^result ') || {
      echo "profile: $a gave no result:" >&2; cat "$tmp/stderr" >&2; exit 1; }
    field() { echo "$result" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
    ops=$(field operations)
    rtt=$(field rtt_ns)
    keys=sym
    case $a in sheafalloc*) keys=sym,srcfile ;; esac
    split=$(classify "$tmp/perf.data" "$ops" "$keys")
    echo "$((r + 1)) $a $((ops / seconds)) ${rtt:-0} $split" | tee -a "$rows" >&2
  done
done

{
  echo "# CPU per request: $workload"
  echo
  echo "\`${baseline:+SHEAFALLOC_BASELINE=$baseline }bash bench/profile-per-request.sh $workload $rounds $seconds\`; commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- alloc-core alloc-global bench/src || echo ' (with uncommitted changes)'); $(uname -r); $(nproc) CPUs."
  echo
  echo "Worker-thread \`cpu-clock\` samples per 1000 requests, medians over $rounds rounds (allocator order rotated each round). Lower is better. \`allocator\`: the allocator's own symbols, and for sheafalloc the code of its fast path inlined into callers (by source file); \`rest\`: the handlers, serde, tokio, hyper."
  echo
  echo "| allocator | requests/s | worker | kernel | memcpy | allocator | rest | worker vs sheafalloc |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  median() { sort -g | awk '{v[NR] = $1} END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  base=$(awk '$2 == "sheafalloc" { print $5 }' "$rows" | median)
  for a in "${allocators[@]}"; do
    col() { awk -v a="$a" -v c="$1" '$2 == a { print $c }' "$rows" | median; }
    worker=$(col 5)
    printf "| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |\n" "$a" "$(col 3)" "$worker" \
      "$(col 6)" "$(col 7)" "$(col 8)" "$(col 9)" "$(awk -v w="$worker" -v b="$base" 'BEGIN { print w / b }')"
  done
  echo
  echo "Every run (round, allocator, requests/s, round trip ns, worker, kernel, memcpy, allocator, rest):"
  echo
  echo '```'
  cat "$rows"
  echo '```'
} > "$out"
echo "wrote $out" >&2
