#!/usr/bin/env bash
# Webhooks at the rate of the changes: a cleanup run removes N components of one APT hosted
# repository, and two subscriptions to `component.deleted` — one event per request, and one that
# takes batches — send them to two local receivers (Python's threading HTTP/1.1 server, kept
# alive, answering 204). Measures how long each takes from the run's start until its receiver
# has every event, the rate, and checks that each event arrived once and in order. At the
# default configuration but for `webhooks.allowed_networks` (the receivers are on loopback).
# Writes docs/perf/webhooks.md (OUT= to change).
#
#   loadtest/webhooks.sh
#
# Environment: N (10000), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
N=${N:-10000}
OUT=${OUT:-docs/perf/webhooks.md}

name=webhooks
# shellcheck source=loadtest/common.sh
. loadtest/common.sh
now_ms() { date +%s%3N; }

# A receiver: appends "<delivery id> <event id> <ms received>" per event to $2, answers 204.
cat >"$work/receiver.py" <<'PY'
import http.server, json, sys, threading, time
log = open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        v = json.loads(body)
        events = v["batch"] if "batch" in v else [v]
        at = int(time.time() * 1000)
        with lock:
            for e in events:
                log.write("%s %d %d\n" % (e.get("delivery", self.headers["X-Packyard-Delivery"]), e["id"], at))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
r1=$(free_port); r2=$(free_port)
python3 "$work/receiver.py" "$r1" "$work/single.log" & receivers=$!
python3 "$work/receiver.py" "$r2" "$work/batch.log" & receivers="$receivers $!"
trap 'kill $receivers 2>/dev/null || true; cleanup' EXIT

pw=webhooks-admin
p_port=$(free_port); m_port=$(free_port)
mkdir -p "$work/p"
(cd "$work/p" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
  PACKYARD_SERVER__BIND=127.0.0.1:$p_port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$m_port \
  PACKYARD_WEBHOOKS__ALLOWED_NETWORKS='["127.0.0.1/32"]' "$api" >"$work/p.log" 2>&1) &
pid=$!
wait_http "http://127.0.0.1:$m_port/readyz"
url=http://127.0.0.1:$p_port
api_call() { curl -fsS -u admin:$pw -H 'content-type: application/json' "$@"; }
api_call "$url/api/v1/repositories" -d '{"name":"junk","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}' >/dev/null
log "seeding $N packages"
"$lt" visible --target "$url/repository/junk/" --auth "admin:$pw" --seed "$N" --samples 1 --pause-ms 0
api_call "$url/api/v1/webhooks" -d '{"name":"single","url":"http://127.0.0.1:'"$r1"'/","events":["component.deleted"]}' >/dev/null
api_call "$url/api/v1/webhooks" -d '{"name":"batched","url":"http://127.0.0.1:'"$r2"'/","events":["component.deleted"],"batch":true}' >/dev/null
api_call "$url/api/v1/cleanup-policies" \
  -d '{"name":"junk","format":"apt","criteria":{"name_regex":"^seed-"},"repositories":["junk"]}' >/dev/null
log "cleanup run: $N components"
t0=$(now_ms)
api_call -X POST "$url/api/v1/cleanup-policies/junk/run" >/dev/null
lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
single_ms=""; batch_ms=""
while [ -z "$single_ms" ] || [ -z "$batch_ms" ]; do
  [ -z "$single_ms" ] && [ "$(lines "$work/single.log")" -ge "$N" ] && single_ms=$(( $(now_ms) - t0 ))
  [ -z "$batch_ms" ] && [ "$(lines "$work/batch.log")" -ge "$N" ] && batch_ms=$(( $(now_ms) - t0 ))
  [ $(( $(now_ms) - t0 )) -lt 600000 ] || { echo "not every event arrived in 10 minutes" >&2; exit 1; }
  sleep 0.05
done
sleep 2 # anything sent twice would arrive now
cleanup_ms=$(api_call "$url/api/v1/cleanup-policies/junk/runs" | python3 -c 'import json,sys
r=[x for x in json.load(sys.stdin)["items"] if x["repository"]=="junk"][0]; print(r.get("durationMs") or 0)')
# Each event once, in order (the event ids rise in the order they arrived).
check() { python3 - "$1" "$N" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
ids = [int(r[1]) for r in rows]
n = int(sys.argv[2])
assert len(ids) == n, "%d events, want %d" % (len(ids), n)
assert len(set(ids)) == n, "an event arrived twice"
assert ids == sorted(ids), "out of order"
print("ok")
PY
}
single_ok=$(check "$work/single.log"); batch_ok=$(check "$work/batch.log")
# From the first event received to the last: the delivery rate, apart from the run's start.
span() { awk 'NR == 1 { a = $3 } { b = $3 } END { print b - a }' "$1"; }
single_span=$(span "$work/single.log"); batch_span=$(span "$work/batch.log")
rate() { awk -v n="$N" -v ms="$1" 'BEGIN { printf "%.0f", (ms > 0 ? n * 1000 / ms : 0) }'; }
single_rate=$(rate "$single_span"); batch_rate=$(rate "$batch_span")

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
{
  echo "# Webhooks at the rate of the changes"
  echo
  echo "Generated by \`loadtest/webhooks.sh\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r), Packyard"
  echo "$(git rev-parse --short HEAD) (release build, the default configuration — embedded default, SQLite and local files,"
  echo "log level info — but for \`webhooks.allowed_networks = [\"127.0.0.1/32\"]\`: the receivers are on loopback). A"
  echo "cleanup run removes $N components of one APT hosted repository (the run: $cleanup_ms ms); two subscriptions to"
  echo "\`component.deleted\` send its events to two receivers (Python's threading HTTP/1.1 server, kept alive, 204)."
  echo "From the run's request (the worker picks it up at its next \`worker.cleanup_poll_ms\`, up to 10 s) until the"
  echo "receiver holds every event; the rate from the first event received to the last; each event arrived once"
  echo "and in order (checked 2 s after the last, so that anything sent twice would be counted)."
  echo
  echo "| subscription | events | from the run's request, ms | first to last event, ms | events/s | once, in order |"
  echo "|---|---|---|---|---|---|"
  echo "| one event per request | $N | $single_ms | $single_span | $single_rate | $single_ok |"
  echo "| \`\"batch\": true\` | $N | $batch_ms | $batch_span | $batch_rate | $batch_ok |"
  echo
  echo "Reproduce: \`loadtest/webhooks.sh\` (N=$N)."
} >"$OUT"
cat "$OUT"
