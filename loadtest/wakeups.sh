#!/usr/bin/env bash
# Upload → publication with and without RabbitMQ (#44), side by side in one run, on the scaled-out
# shape: deploy/local-cluster.sh (PostgreSQL, Redis, S3 test server, two api replicas, one
# worker, nginx) with the broker, and the same cluster without it (the worker finds changes by
# polling `worker.poll_ms`). Each variant: a hosted APT repository seeded with SEED packages,
# then one upload at a time through nginx, timed from its 201 until `Release` has changed and
# `Packages` lists it (`packyard-loadtest visible`), after a pause and back to back; then the
# cluster's database queries per second while idle (every process's
# `packyard_db_queries_total`, over IDLE_SECONDS). The default configuration first; the broker
# with `worker.poll_ms = 10000` beside it (what the broker carries alone). Variants alternate
# over ROUNDS. Writes docs/perf/wakeups.md (OUT).
#
#   loadtest/wakeups.sh
#
# Environment: SAMPLES (20), SEED (200), ROUNDS (2), IDLE_SECONDS (10), CLUSTER_PORT (18480),
# PREBUILT=1 (use target/release as built), OUT (docs/perf/wakeups.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf '==> %s\n' "$*" >&2; }
SAMPLES=${SAMPLES:-20}
SEED=${SEED:-200}
ROUNDS=${ROUNDS:-2}
IDLE_SECONDS=${IDLE_SECONDS:-10}
OUT=${OUT:-docs/perf/wakeups.md}

if [ "${PREBUILT:-0}" != 1 ]; then
  log "building release binaries"
  cargo build --release -q -p packyard-api -p packyard-worker -p packyard-loadtest
fi
bin=$root/target/release
lt=$bin/packyard-loadtest

work=$(mktemp -d /tmp/packyard-wakeups.XXXXXX)
export CLUSTER_DIR=$work/cluster CLUSTER_PORT=${CLUSTER_PORT:-18480} CLUSTER_BIN_DIR=$bin
export CLUSTER_DB=packyard_perf_wakeups
cleanup() { deploy/local-cluster.sh down >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

samples() { python3 -c 'import json,sys; print("\n".join(str(x) for x in json.load(open(sys.argv[1]))["samples_ms"]))' "$1"; }
# The sum of packyard_db_queries_total over the three processes.
queries() {
  curl -fsS "$API1_MANAGEMENT_URL/metrics" "$API2_MANAGEMENT_URL/metrics" "$WORKER_MANAGEMENT_URL/metrics" |
    awk '/^packyard_db_queries_total\{/ { s += $NF } END { printf "%.0f", s }'
}

# variant NAME AMQP POLL_MS: one cluster, measured; appends "NAME pause b2b idle" to $work/results.
variant() {
  local name=$1 amqp=$2 poll=$3
  log "$name (AMQP_URL=$amqp, worker.poll_ms=${poll:-default})"
  AMQP_URL=$amqp CLUSTER_WORKER_POLL_MS=$poll deploy/local-cluster.sh up >/dev/null
  # shellcheck disable=SC1091
  . "$CLUSTER_DIR/cluster.env"
  curl -fsS -u "admin:$ADMIN_PASSWORD" -H 'Content-Type: application/json' \
    -d '{"name":"debs","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}' \
    "$LB_URL/api/v1/repositories" >/dev/null
  local target=$LB_URL/repository/debs/ tag
  tag=$(echo "$name" | tr -c 'a-z0-9\n' '-')
  "$lt" visible --target "$target" --auth "admin:$ADMIN_PASSWORD" --seed "$SEED" --samples "$SAMPLES" \
    --output "$work/$tag-pause.json" >/dev/null
  "$lt" visible --target "$target" --auth "admin:$ADMIN_PASSWORD" --samples "$SAMPLES" --pause-ms 0 \
    --output "$work/$tag-b2b.json" >/dev/null
  local q0 q1
  sleep 2
  q0=$(queries); sleep "$IDLE_SECONDS"; q1=$(queries)
  echo "$name|$(samples "$work/$tag-pause.json" | tr '\n' ' ')|$(samples "$work/$tag-b2b.json" | tr '\n' ' ')|$(( (q1 - q0) / IDLE_SECONDS ))" >>"$work/results"
  deploy/local-cluster.sh down >/dev/null
}

: >"$work/results"
broker=${BROKER_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
names=("RabbitMQ" "no broker (polling)" "RabbitMQ, worker.poll_ms = 10000")
amqps=("$broker" none "$broker")
polls=("" "" 10000)
for r in $(seq 1 "$ROUNDS"); do
  # Alternating order: the first variant of a round goes last in the next.
  order=(0 1 2)
  [ $((r % 2)) = 0 ] && order=(2 1 0)
  for i in "${order[@]}"; do
    variant "${names[$i]}" "${amqps[$i]}" "${polls[$i]}"
  done
done

# The raw samples survive a failed report.
cp "$work/results" /tmp/packyard-wakeups-results.txt
table() {
  python3 - "$work/results" "$@" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    name, pause, b2b, idle = line.rstrip("\n").split("|")
    r = rows.setdefault(name, {"pause": [], "b2b": [], "idle": []})
    r["pause"] += [float(x) for x in pause.split()]
    r["b2b"] += [float(x) for x in b2b.split()]
    r["idle"].append(int(idle))
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int((len(v) - 1) * p + 0.5))]
base = rows[sys.argv[2]]
for name in sys.argv[2:]:
    r = rows[name]
    p50, b50 = q(r["pause"], 0.5), q(r["b2b"], 0.5)
    ratio = "—" if name == sys.argv[2] else f"{p50 / max(q(base['pause'], 0.5), 1):.1f}×"
    bratio = "—" if name == sys.argv[2] else f"{b50 / max(q(base['b2b'], 0.5), 1):.1f}×"
    idle = sorted(r["idle"])[len(r["idle"]) // 2]
    print(f"| {name} | {p50:.0f} | {q(r['pause'], 0.95):.0f} | {max(r['pause']):.0f} | {ratio} | {b50:.0f} | {q(r['b2b'], 0.95):.0f} | {max(r['b2b']):.0f} | {bratio} | {idle} |")
PY
}

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
{
  echo "# Upload to publication, with and without RabbitMQ"
  echo
  echo "Generated by \`loadtest/wakeups.sh\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r), Packyard"
  echo "$(git rev-parse --short HEAD) (release build). The cluster is \`deploy/local-cluster.sh\`: PostgreSQL, Redis,"
  echo "the moto S3 test server, two api replicas, one worker and nginx on this one loopback machine, with"
  echo "RabbitMQ (\`events.amqp_url\`) and without it. A hosted APT repository seeded with $SEED packages,"
  echo "then one upload at a time through nginx, timed from its 201 until \`Release\` has changed and"
  echo "\`Packages\` lists it (\`packyard-loadtest visible\`): $SAMPLES uploads 300 ms apart, then $SAMPLES back to"
  echo "back, per variant and round; $ROUNDS rounds, the variants' order alternating. Idle: the cluster's"
  echo "database queries per second over $IDLE_SECONDS s with nothing to do (\`packyard_db_queries_total\` of"
  echo "the three processes). Ratios: p50 against RabbitMQ at the default configuration."
  echo
  echo "## The default configuration (\`worker.poll_ms = 500\`)"
  echo
  echo "| variant | after a pause: p50 ms | p95 ms | max ms | ratio | back to back: p50 ms | p95 ms | max ms | ratio | idle queries/s |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  table "${names[0]}" "${names[1]}"
  echo
  echo "## Beside it: RabbitMQ with \`worker.poll_ms = 10000\` (the broker alone wakes the worker)"
  echo
  echo "| variant | after a pause: p50 ms | p95 ms | max ms | ratio | back to back: p50 ms | p95 ms | max ms | ratio | idle queries/s |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  table "${names[0]}" "${names[2]}"
  echo
  echo "Reproduce: \`loadtest/wakeups.sh\` (SAMPLES=$SAMPLES SEED=$SEED ROUNDS=$ROUNDS IDLE_SECONDS=$IDLE_SECONDS)."
} >"$OUT"
cat "$OUT"
