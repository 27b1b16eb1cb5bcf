#!/usr/bin/env bash
# Checks the control plane's /metrics with the real Prometheus tools:
#
#  1. builds and starts control-server/examples/serve, a process whose only
#     control-plane code is sheafalloc's `control` feature, with
#     SHEAFALLOC_CONTROL_ADDR=127.0.0.1:0 (the sidecar starts before main
#     and prints its URL) and simulated NUMA nodes (so remote frees and
#     per-node series have something to show);
#  2. pipes one scrape of /metrics into `promtool check metrics`;
#  3. starts a real `prometheus` on loopback (temporary config, 1 s scrape
#     interval, temporary TSDB) and waits until the series arrive through
#     its HTTP API, then checks specific series (labels and values);
#  4. changes a capacity with `sheafctl`, as an operator would;
#  5. runs every query of dashboards/grafana-sheafalloc.json (each panel's
#     `expr`, and each variable's `label_values` as the series it lists)
#     against that Prometheus and fails unless every one returns data: a
#     panel that parses but shows nothing is a failure too.
#
# Everything listens on 127.0.0.1 only, every wait is bounded, both
# processes are stopped on exit. Exit status 0 only if every check passed.
#
# Needs: cargo, curl, python3, promtool and prometheus (Debian package
# `prometheus`). Honours CARGO_TARGET_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WAIT_SECONDS=30

fail() {
    echo "check-prometheus: FAIL: $*" >&2
    exit 1
}

for tool in cargo curl python3 promtool prometheus; do
    command -v "$tool" >/dev/null || fail "$tool not found (prometheus and promtool: apt-get install prometheus)"
done

WORK=$(mktemp -d)
SERVE_PID=
PROMETHEUS_PID=
cleanup() {
    local status=$?
    for pid in $PROMETHEUS_PID $SERVE_PID; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in $PROMETHEUS_PID $SERVE_PID; do
        wait "$pid" 2>/dev/null || true
    done
    if [ "$status" -ne 0 ]; then
        for log in "$WORK"/*.log; do
            [ -f "$log" ] || continue
            echo "--- $(basename "$log") (last lines) ---" >&2
            tail -n 20 "$log" >&2
        done
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port (bound, then released, by the OS's choice).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

echo "check-prometheus: building the serve example and sheafctl"
# The workspace configuration of the test command (`-p` would resolve
# features anew and rebuild the dependencies).
(cd "$ROOT" && cargo build --quiet --workspace --all-features --example serve --bin sheafctl)
SERVE="$TARGET_DIR/debug/examples/serve"
SHEAFCTL="$TARGET_DIR/debug/sheafctl"
[ -x "$SERVE" ] || fail "no binary at $SERVE"
[ -x "$SHEAFCTL" ] || fail "no binary at $SHEAFCTL"

# 1. The process, with the sidecar started by the environment variable.
# More simulated nodes than CPUs (at most the allocator's 16): threads then
# take nodes round-robin, so the hand-off thread pair of the example sits
# on two nodes and its frees are remote.
NODES=$(( $(nproc) + 1 ))
[ "$NODES" -le 16 ] || NODES=16
SHEAFALLOC_CONTROL_ADDR=127.0.0.1:0 SHEAFALLOC_CONTROL_TOKEN= SHEAFALLOC_CONTROL_TOKEN_FILE= \
    SHEAFALLOC_NUMA_NODES=$NODES \
    timeout 300 "$SERVE" --seconds 240 >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
URL=
for _ in $(seq 1 $((WAIT_SECONDS * 10))); do
    URL=$(sed -n 's|^sheafalloc: control plane listening on \(http://127\.0\.0\.1:[0-9]*\)$|\1|p' "$WORK/serve.log" | head -n 1)
    [ -n "$URL" ] && break
    kill -0 "$SERVE_PID" 2>/dev/null || fail "the serve process exited early"
    sleep 0.1
done
[ -n "$URL" ] || fail "the sidecar printed no URL within ${WAIT_SECONDS}s"
SIDECAR_ADDR=${URL#http://}
echo "check-prometheus: sidecar at $URL"
curl --silent --show-error --fail --max-time 5 "$URL/healthz" >/dev/null || fail "GET /healthz"

# 2. The exposition, through promtool's parser and linter.
curl --silent --show-error --fail --max-time 10 "$URL/metrics" >"$WORK/metrics.txt" || fail "GET /metrics"
if ! promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool.log" 2>&1; then
    cat "$WORK/promtool.log" >&2
    fail "promtool check metrics found problems"
fi
echo "check-prometheus: promtool check metrics: OK ($(grep -vc '^#' "$WORK/metrics.txt") samples)"

# 3. A real Prometheus scraping it.
PROMETHEUS_PORT=$(free_port)
PROMETHEUS_URL="http://127.0.0.1:$PROMETHEUS_PORT"
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sheafalloc
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["$SIDECAR_ADDR"]
EOF
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "the temporary Prometheus config is invalid"
timeout 300 prometheus \
    --config.file="$WORK/prometheus.yml" \
    --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" \
    --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PROMETHEUS_PID=$!

# Evaluates one instant query; prints the result vector as JSON lines.
query() {
    curl --silent --show-error --fail --max-time 5 --get \
        --data-urlencode "query=$1" "$PROMETHEUS_URL/api/v1/query"
}

# Waits until `check` (a python expression over `result`, the vector of
# series) holds for query $1; $2 describes it.
expect() {
    local promql=$1 what=$2 check=$3
    local deadline=$((SECONDS + WAIT_SECONDS)) answer=
    while [ "$SECONDS" -lt "$deadline" ]; do
        kill -0 "$PROMETHEUS_PID" 2>/dev/null || fail "prometheus exited"
        kill -0 "$SERVE_PID" 2>/dev/null || fail "the serve process exited"
        if answer=$(query "$promql" 2>/dev/null) &&
            python3 -c '
import json, sys
reply = json.loads(sys.argv[1])
result = reply["data"]["result"] if reply.get("status") == "success" else []
value = lambda series: float(series["value"][1])
sys.exit(0 if result and ('"$check"') else 1)
' "$answer"; then
            echo "check-prometheus: $what: OK"
            return 0
        fi
        sleep 0.5
    done
    fail "$what: not seen within ${WAIT_SECONDS}s (query: $promql; last answer: ${answer:-none})"
}

expect 'sheafalloc_allocations_total' \
    "sheafalloc_allocations_total scraped, every series with a cache label" \
    'len(result) >= 3 and all(series["metric"].get("cache", "").startswith(("size-", "aligned-")) for series in result)'
expect 'up{job="sheafalloc"}' "the target is up" 'all(value(series) == 1 for series in result)'
expect 'sheafalloc_allocations_total{cache="size-256"}' \
    "sheafalloc_allocations_total{cache=\"size-256\"} > 0" 'value(result[0]) > 0'
expect 'sheafalloc_allocations_total{cache="size-2304"}' \
    "sheafalloc_allocations_total{cache=\"size-2304\"} > 0 (2112-byte buffers)" 'value(result[0]) > 0'
expect 'rate(sheafalloc_allocations_total{cache="size-256"}[5s])' \
    "the size-256 allocation rate is positive (the counter moves between scrapes)" 'value(result[0]) > 0'
expect 'sheafalloc_held_bytes{cache="size-256"}' "sheafalloc_held_bytes{cache=\"size-256\"} > 0" 'value(result[0]) > 0'
expect 'sheafalloc_sheaf_capacity{cache="size-256"}' \
    "sheafalloc_sheaf_capacity{cache=\"size-256\"} within 1..=1024" '1 <= value(result[0]) <= 1024'
expect 'sheafalloc_nodes' "sheafalloc_nodes >= 1" 'value(result[0]) >= 1'
expect 'sheafalloc_node_info{node="0"}' "sheafalloc_node_info{node=\"0\"} == 1" 'value(result[0]) == 1'
expect 'sheafalloc_held_bytes{cache="size-256"}' \
    "barn and slab figures are per node only (cache and node labels)" \
    'len(result) >= 2 and all("node" in series["metric"] and series["metric"]["cache"] == "size-256" for series in result)'
expect 'sheafalloc_threads' "sheafalloc_threads >= 1" 'value(result[0]) >= 1'
expect 'sheafalloc_slow_path_allocations_total{cache="size-256"}' \
    "slow-path allocations are counted" 'value(result[0]) > 0'
expect 'sheafalloc_live_bytes{cache="size-2304"}' "sheafalloc_live_bytes{cache=\"size-2304\"} > 0 (kept buffers)" 'value(result[0]) > 0'
expect 'sheafalloc_build_info' "sheafalloc_build_info carries the version" \
    'value(result[0]) == 1 and result[0]["metric"].get("version", "") != ""'
expect 'process_resident_memory_bytes{job="sheafalloc"}' "the process's RSS" 'value(result[0]) > 1e6'
expect 'sum(rate(sheafalloc_node_remote_frees_total[10s]))' \
    "remote frees between simulated nodes" 'value(result[0]) > 0'

# 4. An operator raises a capacity; the dashboard's capacity panels show it.
"$SHEAFCTL" --addr "$SIDECAR_ADDR" set-capacity size-256 48 >"$WORK/sheafctl.log" 2>&1 ||
    { cat "$WORK/sheafctl.log" >&2; fail "sheafctl set-capacity"; }
"$SHEAFCTL" --addr "$SIDECAR_ADDR" list >>"$WORK/sheafctl.log" 2>&1 ||
    { cat "$WORK/sheafctl.log" >&2; fail "sheafctl list"; }
expect 'changes(sheafalloc_sheaf_capacity{cache="size-256"}[10m])' \
    "the capacity change reached Prometheus" 'value(result[0]) >= 1'

# 5. The dashboard's queries, with Grafana's variables filled in; each must
# return data. A variable's `label_values(selector, label)` becomes the
# series it would list.
python3 - "$ROOT/dashboards/grafana-sheafalloc.json" >"$WORK/dashboard-queries.txt" <<'EOF'
import json, re, sys
dashboard = json.load(open(sys.argv[1]))
def fill(expr):
    for name, value in [("$__rate_interval", "10s"), ("$__interval", "5s"), ("$__range", "10m"),
                        ("$instance", ".*"), ("$cache", ".*")]:
        expr = expr.replace(name, value)
    if "$" in expr:
        sys.exit(f"an unknown variable is left in {expr!r}")
    return expr
queries = []
for variable in dashboard.get("templating", {}).get("list", []):
    match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable.get("definition", ""))
    if match:
        queries.append((f"variable {variable['name']}", f"count by ({match[2]}) ({fill(match[1])})"))
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        queries.append((f"panel \"{panel['title']}\" {target['refId']}", fill(target["expr"])))
for title, expr in queries:
    print(title + "\t" + expr)
EOF
[ -s "$WORK/dashboard-queries.txt" ] || fail "no queries found in the dashboard"
while IFS=$'\t' read -r title promql; do
    expect "$promql" "dashboard $title returns data" 'True'
done <"$WORK/dashboard-queries.txt"
echo "check-prometheus: all $(wc -l <"$WORK/dashboard-queries.txt") dashboard queries return data: OK"
promtool check config "$ROOT/dashboards/prometheus.yml" >/dev/null || fail "dashboards/prometheus.yml is invalid"
echo "check-prometheus: dashboards/prometheus.yml: OK"

echo "check-prometheus: all checks passed"
