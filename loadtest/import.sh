#!/usr/bin/env bash
# `packyard-api import apt` of COUNT generated .deb files from a directory aptly published, into
# a fresh hosted repository at each copy concurrency (1, 4, 8, 16, 32): wall time, files/s, MB/s
# and the import process's peak RSS; then INCR new packages published by aptly and imported
# again (the incremental run the ledger makes quick). One server at the default configuration
# (embedded default: SQLite, file blobs), release builds. Writes docs/perf/import.md (OUT=).
#
#   loadtest/import.sh
#
# Environment: COUNT (10000), BYTES (payload of each package, 16384), INCR (100),
# LEVELS ("1 4 8 16 32"), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
COUNT=${COUNT:-10000}
BYTES=${BYTES:-16384}
INCR=${INCR:-100}
LEVELS=${LEVELS:-"1 4 8 16 32"}
OUT=${OUT:-docs/perf/import.md}

name=import
# shellcheck source=loadtest/common.sh
. loadtest/common.sh
command -v aptly >/dev/null || { echo "aptly is needed (apt-get install aptly)" >&2; exit 1; }

log "generating $COUNT packages of $BYTES bytes"
"$lt" fixture apt --out "$work/debs" --count "$COUNT" --name imported --bytes "$BYTES"
conf=$work/aptly.conf
printf '{"rootDir": "%s", "architectures": ["amd64"]}\n' "$work/aptly" >"$conf"
aptly_() { HOME=$work aptly -config="$conf" "$@" >/dev/null; }
log "publishing them with aptly"
aptly_ repo create -distribution=stable -component=main src
aptly_ repo add src "$work/debs"
aptly_ publish repo -skip-signing -architectures=amd64 src
public=$work/aptly/public
total_bytes=$(du -sb "$public/pool" | cut -f1)

pw=import-admin
p_port=$(free_port); m_port=$(free_port)
mkdir -p "$work/p"
(cd "$work/p" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
  PACKYARD_SERVER__BIND=127.0.0.1:$p_port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$m_port \
  "$api" >"$work/p.log" 2>&1) &
pid=$!
wait_http "http://127.0.0.1:$m_port/readyz"
url=http://127.0.0.1:$p_port
create() {
  curl -fsS -u admin:$pw -H 'content-type: application/json' "$url/api/v1/repositories" \
    -d "{\"name\":\"$1\",\"format\":\"apt\",\"type\":\"hosted\",\"apt\":{\"distribution\":\"stable\",\"components\":[\"main\"],\"architectures\":[\"amd64\"]}}" >/dev/null
}
# Runs an import; prints "seconds peak_rss_kib summary".
import_() {
  local repo=$1 conc=$2
  (cd "$work/p" && env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
    /usr/bin/time -f '%e %M' -o "$work/time" "$api" import apt --from "$public" --into "$repo" --concurrency "$conc" \
    >"$work/import.out" 2>"$work/import.err")
  echo "$(cat "$work/time") $(grep ' planned, ' "$work/import.out")"
}

rows=""
for c in $LEVELS; do
  create "c$c"
  log "import at concurrency $c"
  read -r secs rss summary < <(import_ "c$c" "$c")
  files_s=$(python3 -c "print(f'{$COUNT/$secs:.0f}')")
  mb_s=$(python3 -c "print(f'{$total_bytes/$secs/1e6:.1f}')")
  rows+="| $c | $secs | $files_s | $mb_s | $((rss / 1024)) |"$'\n'
  log "  $secs s, $files_s files/s, $mb_s MB/s, peak RSS $((rss / 1024)) MiB: $summary"
done

log "incremental: $INCR new packages"
"$lt" fixture apt --out "$work/more" --count "$INCR" --name added --bytes "$BYTES"
aptly_ repo add src "$work/more"
aptly_ publish update -skip-signing stable
read -r incr_secs incr_rss incr_summary < <(import_ c8 8)
log "  $incr_secs s: $incr_summary"
again_secs=$(import_ c8 8 | cut -d' ' -f1)

cat >"$OUT" <<EOF
# Importing an APT repository (\`packyard-api import apt\`)

\`loadtest/import.sh\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d):
$COUNT generated \`.deb\` files of $BYTES payload bytes ($((total_bytes / 1000000)) MB in all) published by
aptly into a directory, imported into a fresh hosted repository of one server at the default
configuration (SQLite, file blobs) at each copy concurrency. The server kept running; its worker
published what each import stored. RSS is the import process's peak.

| concurrency | seconds | files/s | MB/s | peak RSS (MiB) |
|---|---|---|---|---|
$rows
Incremental: $INCR packages added to the aptly repository and the import run again at
concurrency 8: **$incr_secs s** ($incr_summary). Run again with nothing new: $again_secs s.
EOF
log "wrote $OUT"
