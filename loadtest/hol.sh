#!/usr/bin/env bash
# Head-of-line blocking: does one repository's large publication hold up the others? On one
# server at the default configuration (embedded default: SQLite, file blobs, log level info):
#   - a Go hosted upload's latency (the PUT answers once its version is published), and
#   - an APT hosted upload's time to visibility (`packyard-loadtest visible`),
# each p50/p95, measured three times: on the idle server; while an APT group over a hosted
# member of BIG packages rebuilds whole, again and again (an administrator's rebuild, which
# carries nothing over from the last build); and while a cleanup run removes CLEANUP components
# from another hosted repository. Writes docs/perf/hol.md (OUT= to change).
#
#   loadtest/hol.sh
#
# Environment: BIG (60000), CLEANUP (10000), SAMPLES (20), OUT; CONCURRENCY sets
# `worker.concurrency` (a figure beside the default one, never instead of it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BIG=${BIG:-60000}
CLEANUP=${CLEANUP:-10000}
SAMPLES=${SAMPLES:-20}
OUT=${OUT:-docs/perf/hol.md}

name=hol
# shellcheck source=loadtest/common.sh
. loadtest/common.sh
now_ms() { date +%s%3N; }
# p50 p95 of the numbers on stdin
quantiles() { sort -n | awk '{ v[NR] = $1 } END { i50 = int((NR - 1) * 0.5 + 0.5) + 1; i95 = int((NR - 1) * 0.95 + 0.5) + 1; printf "%.0f %.0f", v[i50], v[i95] }'; }

pw=hol-admin
p_port=$(free_port); m_port=$(free_port)
mkdir -p "$work/p"
(cd "$work/p" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
  PACKYARD_SERVER__BIND=127.0.0.1:$p_port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$m_port \
  ${CONCURRENCY:+PACKYARD_WORKER__CONCURRENCY=$CONCURRENCY} "$api" >"$work/p.log" 2>&1) &
pid=$!
wait_http "http://127.0.0.1:$m_port/readyz"
url=http://127.0.0.1:$p_port
api_call() { curl -fsS -u admin:$pw -H 'content-type: application/json' "$@"; }
create() { api_call "$url/api/v1/repositories" -d "$1" >/dev/null; }
create '{"name":"big","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}'
create '{"name":"app","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}'
create '{"name":"junk","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}'
create '{"name":"gomods","format":"go","type":"hosted"}'

log "seeding $BIG packages into big, $CLEANUP into junk"
"$lt" visible --target "$url/repository/big/" --auth "admin:$pw" --seed "$BIG" --samples 1 --pause-ms 0
"$lt" visible --target "$url/repository/junk/" --auth "admin:$pw" --seed "$CLEANUP" --samples 1 --pause-ms 0
"$lt" visible --target "$url/repository/app/" --auth "admin:$pw" --seed 3000 --samples 1 --pause-ms 0
log "the group's first merge"
t0=$(now_ms)
create '{"name":"all","format":"apt","type":"group","group":{"members":["big"]},"apt":{"architectures":["amd64"]}}'
until curl -fsS -o /dev/null "$url/repository/all/dists/stable/InRelease" 2>/dev/null; do sleep 0.05; done
first_merge=$(( $(now_ms) - t0 ))

for round in 1 2 3; do
  for i in $(seq 1 "$SAMPLES"); do
    "$lt" fixture go --out "$work/m-$round-$i.zip" --module example.com/hol --version "v1.$round.$i" --bytes 1024
  done
done
# SAMPLES Go uploads one after another (versions v1.ROUND.i); prints each PUT's time in ms.
go_uploads() {
  local round=$1 i
  for i in $(seq 1 "$SAMPLES"); do
    curl -fsS -o /dev/null -w '%{time_total}\n' -u admin:$pw -T "$work/m-$round-$i.zip" \
      "$url/repository/gomods/example.com/hol/@v/v1.$round.$i.zip" | awk '{ printf "%.1f\n", $1 * 1000 }'
  done
}
# Go latencies and APT visibilities, measured side by side; prints "go_p50 go_p95 apt_p50 apt_p95".
measure() {
  local tag=$1 round=$2
  "$lt" visible --target "$url/repository/app/" --auth "admin:$pw" --samples "$SAMPLES" --pause-ms 0 \
    --output "$work/apt-$tag.json" >/dev/null &
  local apt_pid=$!
  go_uploads "$round" >"$work/go-$tag.txt"
  wait "$apt_pid"
  local go apt
  go=$(quantiles <"$work/go-$tag.txt")
  apt=$(python3 -c 'import json,sys; print("\n".join(str(x) for x in json.load(open(sys.argv[1]))["samples_ms"]))' \
    "$work/apt-$tag.json" | quantiles)
  echo "$go $apt"
}
# Pending units of a repository; fails when the server does not answer.
status_pending() {
  api_call "$url/api/v1/repositories/$1/status" | python3 -c 'import json,sys; print(sum(1 for u in json.load(sys.stdin)["units"] if u["pending"]))' 2>/dev/null
}
rebuilder=""
trap '[ -n "$rebuilder" ] && kill "$rebuilder" 2>/dev/null; cleanup' EXIT

log "idle"
read -r idle_go50 idle_go95 idle_apt50 idle_apt95 < <(measure idle 1)

log "while the group rebuilds whole, again and again"
rebuilds=0
(
  while api_call -X POST "$url/api/v1/repositories/all/rebuild" >/dev/null; do
    while n=$(status_pending all) && [ "$n" != 0 ]; do sleep 0.02; done
  done
) &
rebuilder=$!
sleep 1
t0=$(now_ms)
read -r reb_go50 reb_go95 reb_apt50 reb_apt95 < <(measure rebuild 2)
reb_ms=$(( $(now_ms) - t0 ))
kill "$rebuilder"; wait "$rebuilder" 2>/dev/null || true
rebuilder=""
group_build_ms=$(api_call "$url/api/v1/repositories/all/status" | python3 -c 'import json,sys; print(max(u["build_ms"] or 0 for u in json.load(sys.stdin)["units"]))')
while n=$(status_pending all) && [ "$n" != 0 ]; do sleep 0.1; done

log "while a cleanup run removes $CLEANUP components"
api_call "$url/api/v1/cleanup-policies" \
  -d '{"name":"junk","format":"apt","criteria":{"name_regex":"^seed-"},"repositories":["junk"]}' >/dev/null
api_call -X POST "$url/api/v1/cleanup-policies/junk/run" >/dev/null
cleanup_state() { api_call "$url/api/v1/cleanup-policies/junk/runs" | python3 -c 'import json,sys
r=[x for x in json.load(sys.stdin)["items"] if x["repository"]=="junk"][0]; print(r["state"], r.get("durationMs") or 0, r.get("components") or 0)'; }
# Until it runs (or, a short one, has already run: then nothing below overlaps it).
until [ "$(cleanup_state | cut -d' ' -f1)" = running ] || [ "$(cleanup_state | cut -d' ' -f3)" != 0 ]; do sleep 0.02; done
t0=$(now_ms)
read -r cl_go50 cl_go95 cl_apt50 cl_apt95 < <(measure cleanup 3)
cl_measure_ms=$(( $(now_ms) - t0 ))
read -r state _ _ < <(cleanup_state)
still_running=$([ "$state" = running ] && echo yes || echo no)
until [ "$(cleanup_state | cut -d' ' -f1)" = idle ]; do sleep 0.5; done
read -r _ cl_duration cl_components < <(cleanup_state)

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
{
  echo "# Head-of-line blocking: other repositories' publications during a large one"
  echo
  echo "Generated by \`loadtest/hol.sh\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r), Packyard"
  echo "$(git rev-parse --short HEAD) (release build, **the default configuration**: embedded default, SQLite and local"
  echo "files, log level info, \`worker.concurrency\` = ${CONCURRENCY:-the number of cores}). One server holds an APT hosted"
  echo "repository \`big\` of $BIG generated packages and a group \`all\` over it (its first merge: $first_merge ms), an APT"
  echo "hosted repository \`junk\` of $CLEANUP packages, an APT hosted repository \`app\` of 3,000 and a Go hosted"
  echo "repository. Measured side by side, $SAMPLES of each: a Go upload's latency (its PUT answers once the version"
  echo "is published; one after another), and an APT upload into \`app\` until \`Release\` has changed and"
  echo "\`Packages\` lists it (\`packyard-loadtest visible\`, each as soon as the previous one was visible)."
  echo
  echo "| while | Go upload p50 ms | p95 ms | APT visible p50 ms | p95 ms |"
  echo "|---|---|---|---|---|"
  echo "| the server is idle | $idle_go50 | $idle_go95 | $idle_apt50 | $idle_apt95 |"
  echo "| \`all\` rebuilds whole, again and again (one rebuild: $group_build_ms ms; measured for $reb_ms ms) | $reb_go50 | $reb_go95 | $reb_apt50 | $reb_apt95 |"
  echo "| a cleanup run removes $cl_components components from \`junk\` (the run: $cl_duration ms; measured for $cl_measure_ms ms, still running at the end: $still_running) | $cl_go50 | $cl_go95 | $cl_apt50 | $cl_apt95 |"
  echo
  echo "Reproduce: \`loadtest/hol.sh\` (BIG=$BIG CLEANUP=$CLEANUP SAMPLES=$SAMPLES)."
} >"$OUT"
cat "$OUT"
