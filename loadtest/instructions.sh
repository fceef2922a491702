#!/usr/bin/env bash
# User-space instructions per request, Packyard against nginx, counted by callgrind (instruction
# counts are stable on this machine where timings are not). Packyard runs in the embedded
# default (log level info, or LOG_LEVEL) with one generated 4 MiB `.deb` published; nginx (one
# process, no access log, open_file_cache) serves the same bytes. For each scenario both are
# warmed up uninstrumented, then REQUESTS requests are counted and the totals divided by them;
# for Packyard the part spent in its own route (`repository::route`) is shown apart from the
# rest (actix-http, actix-web, tokio, the observe middleware, malloc). glibc's memset is counted
# apart: callgrind counts each byte of `rep stosb` as an instruction, so its figure says nothing
# about time. Prints a markdown table; nothing is written under docs/.
# Environment: REQUESTS (10000), LOG_LEVEL (info).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
name=instructions
# shellcheck source=loadtest/common.sh
source loadtest/common.sh
REQUESTS=${REQUESTS:-10000}
LOG_LEVEL=${LOG_LEVEL:-info}
# shellcheck source=loadtest/nginx.sh
. loadtest/nginx.sh
ensure_nginx
command -v valgrind >/dev/null || {
  log "installing valgrind"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
}
chmod 755 "$work"
ngx_pid=""
stop_all() { [ -n "$ngx_pid" ] && kill "$ngx_pid" 2>/dev/null || true; cleanup; }
trap stop_all EXIT

pw=instructions-admin
port=$(free_port); mport=$(free_port); n_port=$(free_port)
"$lt" fixture apt --out "$work/bench.deb" --bytes $((4 * 1024 * 1024))
mkdir -p "$work/srv"
level_env=()
[ "$LOG_LEVEL" = info ] || level_env=("PACKYARD_LOG__LEVEL=$LOG_LEVEL")
(cd "$work/srv" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw ${level_env[@]+"${level_env[@]}"} \
  PACKYARD_SERVER__BIND=127.0.0.1:$port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$mport \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/packyard.cg" "$api" \
  >"$work/packyard.log" 2>&1) &
pid=$!
for _ in $(seq 1 600); do curl -fsS -o /dev/null "http://127.0.0.1:$mport/readyz" 2>/dev/null && break; sleep 0.1; done
base=http://127.0.0.1:$port
curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/repositories" \
  -d '{"name":"debs","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}' >/dev/null
curl -fsS -u admin:$pw --data-binary @"$work/bench.deb" "$base/repository/debs/?wait=true" >/dev/null
deb_path=pool/main/p/packyard-bench/packyard-bench_1.0_amd64.deb
www=$work/www
for f in dists/stable/InRelease "$deb_path"; do
  mkdir -p "$www/$(dirname "$f")"
  curl -fsS -o "$www/$f" "$base/repository/debs/$f"
done
chmod -R a+rX "$www"
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off; sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_timeout 65; keepalive_requests 1000000;
  open_file_cache max=1000 inactive=60s; open_file_cache_valid 60s;
  types { application/octet-stream deb; }
  default_type text/plain;
  client_body_temp_path $work/nginx-tmp;
  server { listen 127.0.0.1:$n_port; root $www; }
}
EOF
mkdir -p "$work/nginx-tmp"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/nginx.cg" \
  "$NGINX" -c "$work/nginx.conf" >"$work/nginx-valgrind.log" 2>&1 &
ngx_pid=$!
wait_http "http://127.0.0.1:$n_port/dists/stable/InRelease"

# count TARGET_PID URL SCENARIO CG: warm up, count REQUESTS requests, dump; prints the dump's
# file (callgrind numbers each dump CG.1, CG.2, ...).
count() {
  local target_pid=$1 url=$2 scenario=$3 cg=$4
  "$lt" compare --target "t=$url" --scenario "$scenario" --requests 2000 --rounds 1 \
    --warmup-requests 2000 --warmup-seconds 1 >/dev/null
  callgrind_control -z "$target_pid" >/dev/null
  callgrind_control -i on "$target_pid" >/dev/null
  "$lt" compare --target "t=$url" --scenario "$scenario" --requests "$REQUESTS" --rounds 1 \
    --warmup-requests 0 --warmup-seconds 0 >/dev/null
  callgrind_control -i off "$target_pid" >/dev/null
  callgrind_control -d "$target_pid" >/dev/null
  sleep 1
  ls -t "$cg".* | head -1
}
# inclusive IR of functions matching PATTERN in FILE (0 if none), the first match.
ir_of() {
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null | grep -F -- "$2" | head -1 |
    awk '{gsub(",", "", $1); v = $1 + 0} END { print v + 0 }'
}
per() { awk -v a="$1" -v n="$REQUESTS" 'BEGIN { printf "%.0f", a / n }'; }

echo "Instructions (user space, callgrind Ir) per request, $REQUESTS requests each at concurrency 16;"
echo "Packyard $(git -C "$root" rev-parse --short HEAD) at log level $LOG_LEVEL, nginx $("$NGINX" -v 2>&1 | sed 's|.*/||')."
echo
echo "| scenario | nginx | Packyard | Packyard / nginx | Packyard's route | the rest of Packyard | memset (nginx, Packyard) |"
echo "|---|---|---|---|---|---|---|"
for scenario in cond:dists/stable/InRelease "head:$deb_path" get:dists/stable/InRelease; do
  n_file=$(count "$ngx_pid" "http://127.0.0.1:$n_port/" "$scenario" "$work/nginx.cg")
  p_file=$(count "$pid" "$base/repository/debs/" "$scenario" "$work/packyard.cg")
  n_total=$(ir_of "$n_file" "PROGRAM TOTALS"); p_total=$(ir_of "$p_file" "PROGRAM TOTALS")
  n_memset=$(ir_of "$n_file" "__memset_"); p_memset=$(ir_of "$p_file" "__memset_")
  route=$(ir_of "$p_file" "packyard_api::repository::route::")
  n_req=$(per $((n_total - n_memset))); p_req=$(per $((p_total - p_memset)))
  echo "| \`$scenario\` | $n_req | $p_req | $(awk -v a="$p_req" -v b="$n_req" 'BEGIN { printf "%.2f×", a / b }') |" \
    "$(per "$route") | $(per $((p_total - p_memset - route))) | $(per "$n_memset"), $(per "$p_memset") |"
done
