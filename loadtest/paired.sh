#!/usr/bin/env bash
# Two builds of Packyard side by side in one run, with nginx as the ceiling: what a change did,
# measured on the same machine in the same minutes (the spread between runs on a shared machine
# is larger than most changes).
#   loadtest/paired.sh OLD_BINARY NEW_BINARY
# Build the old one first, e.g. `git stash; cargo build --release -p packyard-api;
# cp target/release/packyard-api /tmp/packyard-old; git stash pop`. Both start in the embedded
# default (SQLite, local files) in scratch directories, each with a repository holding the same
# generated 4 MiB `.deb`; nginx serves the bytes the new one published. Then the small responses
# (HEAD of the package, 304 and GET of the metadata) and, with UPLOADS=1, uploads at
# concurrency 16 (and each server's CPU per upload) are compared. Prints the markdown tables;
# nothing is written under docs/.
# Environment: LOG_LEVEL (info, the default configuration; or warn), REQUESTS (30000),
# ROUNDS (5), CONCURRENCY (16), UPLOADS (0), UPLOAD_REQUESTS (64), POLICY (0), SELECTORS (0).
# With SELECTORS=N (give the same binary twice), both read as a signed-in user `reader`: "new"'s
# role holds N read privileges on the repository, each narrowed by its own content selector
# (`format == "apt" and (path =^ "/pool/main/t/team-<i>-" or name == "team-<i>-tool")`), the one
# that selects what is read (`path =^ "/dists/" or path =^ "/pool/main/p/"`) last, so every read
# evaluates all N; "old"'s role holds one plain read privilege — the read path's cost of N
# selectors.
# With POLICY=1 (give the same binary twice), the reads go through an APT group over the
# repository: "new" with a policy that gates everything it serves (a quarantine rule that
# matches nothing and `audit` of advisories: every package download looks up its verdict),
# "old" without one — the read path's cost of a policy. POLICY=go does the same for Go: a Go
# group over a hosted repository holding example.com/bench v1.0.0, v1.0.1, v1.1.0 (1 MiB each):
# `@v/list`, a `.mod` and a zip's HEAD, "new"'s with a policy that judges every version it lists
# or hands out per request (a minimum
# release age of a second, passed before the reads start, `audit` of advisories, a rule that
# matches nothing), "old"'s without one.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
old_bin=$(realpath "$1")
new_bin=$(realpath "$2")
cd "$(dirname "$0")/.."
root=$PWD
name=paired
# shellcheck source=loadtest/common.sh
source loadtest/common.sh
REQUESTS=${REQUESTS:-30000}
ROUNDS=${ROUNDS:-5}
CONCURRENCY=${CONCURRENCY:-16}
UPLOADS=${UPLOADS:-0}
UPLOAD_REQUESTS=${UPLOAD_REQUESTS:-64}
POLICY=${POLICY:-0}
SELECTORS=${SELECTORS:-0}
UPLOAD_WARMUP=16
LOG_LEVEL=${LOG_LEVEL:-info}
# shellcheck source=loadtest/nginx.sh
. loadtest/nginx.sh
ensure_nginx
chmod 755 "$work"   # nginx workers run as another user
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  cleanup
}
trap stop_all EXIT

pw=paired-admin
"$lt" fixture apt --out "$work/packyard-bench_1.0_amd64.deb" --bytes $((4 * 1024 * 1024))
deb_path=pool/main/p/packyard-bench/packyard-bench_1.0_amd64.deb
module=example.com/bench
if [ "$POLICY" = go ]; then
  for v in v1.0.0 v1.0.1 v1.1.0; do
    "$lt" fixture go --out "$work/$v.zip" --module $module --version $v --bytes $((1024 * 1024))
  done
fi
start() { # label binary -> sets url_<label>
  local label=$1 bin=$2 port mport level_env=()
  port=$(free_port); mport=$(free_port)
  [ "$LOG_LEVEL" = info ] || level_env=("PACKYARD_LOG__LEVEL=$LOG_LEVEL")
  mkdir -p "$work/$label"
  (cd "$work/$label" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw ${level_env[@]+"${level_env[@]}"} \
    PACKYARD_SERVER__BIND=127.0.0.1:$port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$mport \
    "$bin" >"$work/$label.log" 2>&1) &
  pids+=($!)
  wait_http "http://127.0.0.1:$mport/readyz"
  local base=http://127.0.0.1:$port
  for repo in debs uploads; do
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/repositories" \
      -d "{\"name\":\"$repo\",\"format\":\"apt\",\"type\":\"hosted\",\"apt\":{\"architectures\":[\"amd64\"]}}" >/dev/null
  done
  curl -fsS -u admin:$pw --data-binary @"$work/packyard-bench_1.0_amd64.deb" "$base/repository/debs/?wait=true" >/dev/null
  if [ "$POLICY" = go ]; then
    local policy='' # the Go policy run: "new" reads a gated group, "old" a group without one
    [ "$label" = new ] && policy=',"policy":{"min_release_age_secs":1,"vulnerabilities":"audit","rules":[{"id":"none","action":"deny","name":"nothing-matches-*"}]}'
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/repositories" \
      -d '{"name":"gomods","format":"go","type":"hosted"}' >/dev/null
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/repositories" \
      -d "{\"name\":\"reads\",\"format\":\"go\",\"type\":\"group\",\"group\":{\"members\":[\"gomods\"]}$policy}" >/dev/null
    for v in v1.0.0 v1.0.1 v1.1.0; do
      curl -fsS -u admin:$pw -T "$work/$v.zip" "$base/repository/gomods/$module/@v/$v.zip" >/dev/null
    done
  fi
  if [ "$POLICY" = 1 ]; then
    local policy='' # the policy run: "new" reads a gated group, "old" a group without one
    [ "$label" = new ] && policy=',"policy":{"vulnerabilities":"audit","rules":[{"id":"none","action":"deny","name":"nothing-matches-*"}]}'
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/repositories" \
      -d "{\"name\":\"reads\",\"format\":\"apt\",\"type\":\"group\",\"group\":{\"members\":[\"debs\"]},\"apt\":{\"architectures\":[\"amd64\"]}$policy}" >/dev/null
    wait_http "$base/repository/reads/dists/stable/InRelease"
  fi
  if [ "$SELECTORS" != 0 ]; then
    local privileges='{"repositories":"debs","actions":["read"]}'
    if [ "$label" = new ]; then
      privileges=''
      for i in $(seq 1 "$SELECTORS"); do
        local expression="format == \\\"apt\\\" and (path =^ \\\"/pool/main/t/team-$i-\\\" or name == \\\"team-$i-tool\\\")"
        [ "$i" = "$SELECTORS" ] && expression='path =^ \"/dists/\" or path =^ \"/pool/main/p/\"'
        curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/content-selectors" \
          -d "{\"name\":\"team-$i\",\"expression\":\"$expression\"}" >/dev/null
        privileges+="${privileges:+,}{\"repositories\":\"debs\",\"actions\":[\"read\"],\"content_selector\":\"team-$i\"}"
      done
    fi
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/roles" \
      -d "{\"name\":\"readers\",\"privileges\":[$privileges]}" >/dev/null
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$base/api/v1/users" \
      -d '{"username":"reader","password":"reader-password","roles":["readers"]}' >/dev/null
  fi
  printf -v "url_$label" '%s' "$base"
}
log "starting the old ($old_bin) and the new ($new_bin) build, log level $LOG_LEVEL"
start old "$old_bin"
start new "$new_bin"

reads=debs
files=(dists/stable/InRelease dists/stable/main/binary-amd64/Packages.gz "$deb_path")
scenarios=(--scenario "head:$deb_path" --scenario cond:dists/stable/InRelease --scenario get:dists/stable/InRelease
  --scenario cond:dists/stable/main/binary-amd64/Packages.gz)
if [ "$POLICY" = go ]; then
  reads=reads
  sleep 2 # every version older than the policy's minimum age
  # Both groups list all three versions (the policy holds nothing back).
  for label in new old; do
    url_var=url_$label
    listed=$(curl -fsS "${!url_var}/repository/reads/$module/@v/list" | wc -l)
    [ "$listed" = 3 ] || { echo "$label lists $listed versions, not 3" >&2; exit 1; }
  done
  # (`@latest` and `.info` carry each server's upload time: not the same bytes on both.)
  files=("$module/@v/list" "$module/@v/v1.1.0.mod" "$module/@v/v1.1.0.zip")
  scenarios=(--scenario "get:$module/@v/list" --scenario "get:$module/@v/v1.1.0.mod"
    --scenario "head:$module/@v/v1.1.0.zip")
fi
if [ "$POLICY" = 1 ]; then
  reads=reads
  deb_path=pool/debs/$deb_path # a group's path to its member's package
  # Both reads answer the package (the policy holds nothing back).
  curl -fsS -o /dev/null "$url_new/repository/reads/$deb_path"
fi
www=$work/www
read_auth=()
if [ "$SELECTORS" != 0 ]; then
  read_auth=(--read-auth reader:reader-password)
  # The reader reads the files on both; on "new", not a package no selector selects.
  code=$(curl -sS -o /dev/null -w '%{http_code}' -u reader:reader-password "$url_new/repository/debs/pool/main/t/team-0-tool/team-0-tool_1.0_amd64.deb")
  [ "$code" = 403 ] || { echo "new answers $code, not 403, for what no selector selects" >&2; exit 1; }
fi
for f in "${files[@]}"; do
  mkdir -p "$www/$(dirname "$f")"
  curl -fsS -u admin:$pw -o "$www/$f" "$url_new/repository/$reads/$f"
done
n_port=$(free_port)
start_nginx "${files[0]}"

log "small responses: new, old, nginx"
"$lt" compare --target "new=$url_new/repository/$reads/" --target "old=$url_old/repository/$reads/" \
  --target "nginx=http://127.0.0.1:$n_port/" --requests "$REQUESTS" --concurrency "$CONCURRENCY" \
  --rounds "$ROUNDS" --warmup-requests 2000 --warmup-seconds 2 ${read_auth[@]+"${read_auth[@]}"} \
  "${scenarios[@]}" --markdown "$work/small.md" >/dev/null
echo "## Small responses (log level $LOG_LEVEL$([ "$POLICY" != 0 ] && echo "; new: a group with a policy, old: without")$([ "$SELECTORS" != 0 ] && echo "; signed in; new: $SELECTORS content selectors, old: none"))"
echo
cat "$work/small.md"
# CPU seconds (user + system) a process has used so far.
cpu_seconds() { awk -v tck="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / tck}' "/proc/$1/stat"; }
if [ "$UPLOADS" = 1 ]; then
  log "uploads: new, old"
  cpu_old0=$(cpu_seconds "${pids[0]}"); cpu_new0=$(cpu_seconds "${pids[1]}")
  "$lt" compare --target "new=$url_new/repository/uploads/" --target "old=$url_old/repository/uploads/" \
    --scenario upload:apt --auth "admin:$pw" --requests "$UPLOAD_REQUESTS" --concurrency "$CONCURRENCY" \
    --rounds "$ROUNDS" --upload-warmup "$UPLOAD_WARMUP" --markdown "$work/uploads.md" >/dev/null
  echo
  sleep 2 # the last publications
  # The 4 MiB uploads (rounds and warm-up); the window also holds one 1 KiB preflight upload
  # and the polls for visibility.
  uploads=$((ROUNDS * UPLOAD_REQUESTS + UPLOAD_WARMUP))
  per_upload() { echo "$1 $2 $uploads" | awk '{printf "%.1f", ($2 - $1) * 1000 / $3}'; }
  echo "## Uploads (distinct 4 MiB packages, log level $LOG_LEVEL)"
  echo
  cat "$work/uploads.md"
  echo
  echo "Server CPU (user + system, the embedded worker's publications included) per upload over the"
  echo "$uploads 4 MiB uploads to each: new $(per_upload "$cpu_new0" "$(cpu_seconds "${pids[1]}")") ms, old $(per_upload "$cpu_old0" "$(cpu_seconds "${pids[0]}")") ms."
fi
