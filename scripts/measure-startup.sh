#!/usr/bin/env bash
# Time from exec to /readyz 200, and idle RSS, of packyard-api started in an empty directory.
# Usage: scripts/measure-startup.sh target/release/packyard-api
set -euo pipefail
bin=$(realpath "$1"); dir=$(mktemp -d); cd "$dir"
start=$(date +%s%N)
PACKYARD_SERVER__BIND=127.0.0.1:18080 PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:18081 "$bin" >out.txt 2>err.txt &
pid=$!
until curl -sf http://127.0.0.1:18081/readyz >/dev/null; do sleep 0.005; done
end=$(date +%s%N)
echo "ready_ms=$(( (end-start)/1000000 ))"
sleep 2
echo "idle_rss_kib=$(awk '/VmRSS/{print $2}' /proc/$pid/status) threads=$(ls /proc/$pid/task | wc -l)"
kill -TERM $pid; wait $pid; echo "exit=$?"
