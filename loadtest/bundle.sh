#!/usr/bin/env bash
# Export and import for air-gapped sites (#42), side by side with aptly's way across an air gap
# (publish a snapshot to a directory, carry it, `aptly repo add` its pool on the far side):
# COUNT generated .deb files in a hosted repository of one server (filled by `import apt`),
# `packyard-api export` of it with its peak RSS, `packyard-api import bundle` into a second
# server's fresh instance (its own data directory), then INCR new packages exported `--since` the
# first export (its size against the new blobs plus the manifest) and imported. Both servers at
# the default configuration (embedded default: SQLite, file blobs), release builds. Writes
# docs/perf/bundle.md (OUT=).
#
#   loadtest/bundle.sh
#
# Environment: COUNT (10000), BYTES (payload of each package, 16384), INCR (10), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
COUNT=${COUNT:-10000}
BYTES=${BYTES:-16384}
INCR=${INCR:-10}
OUT=${OUT:-docs/perf/bundle.md}

name=bundle
# shellcheck source=loadtest/common.sh
. loadtest/common.sh
command -v aptly >/dev/null || { echo "aptly is needed (apt-get install aptly)" >&2; exit 1; }

log "generating $COUNT packages of $BYTES bytes"
"$lt" fixture apt --out "$work/debs" --count "$COUNT" --name carried --bytes "$BYTES"
conf=$work/aptly.conf
printf '{"rootDir": "%s", "architectures": ["amd64"]}\n' "$work/aptly" >"$conf"
aptly_() { HOME=$work aptly -config="$conf" "$@" >/dev/null; }
aptly_ repo create -distribution=stable -component=main src
aptly_ repo add src "$work/debs"
aptly_ publish repo -skip-signing -architectures=amd64 src
public=$work/aptly/public

pw=bundle-admin
pids=()
serve() { # dir port mport
  mkdir -p "$1"
  (cd "$1" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
    PACKYARD_SERVER__BIND=127.0.0.1:$2 PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$3 \
    "$api" >"$1.log" 2>&1) &
  pids+=($!)
  wait_http "http://127.0.0.1:$3/readyz"
}
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
a_port=$(free_port); a_m=$(free_port); b_port=$(free_port); b_m=$(free_port)
serve "$work/a" "$a_port" "$a_m"
serve "$work/b" "$b_port" "$b_m"
a=http://127.0.0.1:$a_port
b=http://127.0.0.1:$b_port
curl -fsS -u admin:$pw -H 'content-type: application/json' "$a/api/v1/repositories" \
  -d '{"name":"debs","format":"apt","type":"hosted","apt":{"distribution":"stable","components":["main"],"architectures":["amd64"]}}' >/dev/null
log "filling the source repository"
(cd "$work/a" && "$api" import apt --from "$public" --into debs >/dev/null)

# Runs the binary in an instance's directory under /usr/bin/time; prints "seconds peak_rss_kib".
timed() {
  local dir=$1; shift
  (cd "$dir" && env -u PACKYARD_LOG__LEVEL /usr/bin/time -f '%e %M' -o "$work/time" "$api" "$@" >"$work/out" 2>"$work/err") || {
    cat "$work/out" "$work/err" >&2; exit 1; }
  cat "$work/time"
}
settle() { # url: until the index lists every package
  for _ in $(seq 1 600); do
    n=$(curl -fsS "$1/repository/debs/dists/stable/main/binary-amd64/Packages" 2>/dev/null | grep -c '^Package: ' || true)
    [ "$n" -ge "$2" ] && return 0
    sleep 0.2
  done
  echo "$1 never listed $2 packages" >&2; exit 1
}
settle "$a" "$COUNT"
size_of() { find "$1" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}'; }

log "export"
read -r ex_secs ex_rss < <(timed "$work/a" export --repository debs --to "$work/bundle1")
ex_said=$(cat "$work/out")
size1=$(size_of "$work/bundle1")
log "  $ex_secs s, peak RSS $((ex_rss / 1024)) MiB: $ex_said"
log "import"
read -r im_secs im_rss < <(timed "$work/b" import bundle --from "$work/bundle1")
im_said=$(cat "$work/out")
log "  $im_secs s, peak RSS $((im_rss / 1024)) MiB: $im_said"
t0=$(date +%s.%N)
settle "$b" "$COUNT"
pub_secs=$(python3 -c "import time; print(f'{time.time()-$t0:.2f}')")
same=$(cmp -s <(curl -fsS "$a/repository/debs/dists/stable/main/binary-amd64/Packages") \
  <(curl -fsS "$b/repository/debs/dists/stable/main/binary-amd64/Packages") && echo yes || echo no)
again_secs=$(timed "$work/b" import bundle --from "$work/bundle1" | cut -d' ' -f1)

log "aptly's way: publish a snapshot to a directory, add its pool on the far side"
aptly_ snapshot create snap from repo src
t0=$(date +%s.%N)
HOME=$work aptly -config="$conf" publish snapshot -skip-signing -distribution=carried snap carried >/dev/null
ap_ex=$(python3 -c "import time; print(f'{time.time()-$t0:.2f}')")
conf2=$work/aptly2.conf
printf '{"rootDir": "%s", "architectures": ["amd64"]}\n' "$work/aptly2" >"$conf2"
HOME=$work aptly -config="$conf2" repo create -distribution=stable -component=main far >/dev/null
t0=$(date +%s.%N)
HOME=$work /usr/bin/time -f '%e %M' -o "$work/time" aptly -config="$conf2" repo add far "$work/aptly/public/carried/pool" >/dev/null 2>&1
read -r ap_im ap_rss <"$work/time"

log "incremental: $INCR new packages"
"$lt" fixture apt --out "$work/more" --count "$INCR" --name added --bytes "$BYTES"
new_bytes=$(cat "$work"/more/*.deb | wc -c)
# `import apt` reads a published repository: aptly publishes the new ones first.
aptly_ repo add src "$work/more"
aptly_ publish update -skip-signing stable
(cd "$work/a" && "$api" import apt --from "$public" --into debs >/dev/null)
settle "$a" $((COUNT + INCR))
read -r inc_secs inc_rss < <(timed "$work/a" export --repository debs --since "$work/bundle1" --to "$work/bundle2")
inc_said=$(cat "$work/out")
size2=$(size_of "$work/bundle2")
manifest2=$(stat -c %s "$work/bundle2/manifest.json")
sig2=$(stat -c %s "$work/bundle2/manifest.sig")
files2=$(find "$work/bundle2" -type f | wc -l)
read -r inc_im inc_im_rss < <(timed "$work/b" import bundle --from "$work/bundle2")
inc_im_said=$(cat "$work/out")
settle "$b" $((COUNT + INCR))

mbs() { python3 -c "print(f'{$1/$2/1e6:.1f}')"; }
per_s() { python3 -c "print(f'{$1/$2:.0f}')"; }
cat >"$OUT" <<EOF
# Export and import for air-gapped sites (\`packyard-api export\`, \`import bundle\`)

\`loadtest/bundle.sh\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d):
$COUNT generated \`.deb\` files of $BYTES payload bytes in a hosted APT repository of one server,
exported, and imported into a second instance (its own data directory and database) while both
servers ran, each at the default configuration (SQLite, file blobs). RSS is the command's peak.
Beside it, aptly's way across an air gap: \`aptly publish snapshot\` to a directory, then
\`aptly repo add\` of its pool into a second aptly root.

| $COUNT packages | Packyard | aptly |
|---|---|---|
| export | **$ex_secs s** ($(per_s "$COUNT" "$ex_secs") packages/s, $(mbs "$size1" "$ex_secs") MB/s), peak RSS $((ex_rss / 1024)) MiB | publish snapshot: $ap_ex s |
| import | **$im_secs s** ($(per_s "$COUNT" "$im_secs") packages/s, $(mbs "$size1" "$im_secs") MB/s), peak RSS $((im_rss / 1024)) MiB | repo add: $ap_im s, peak RSS $((ap_rss / 1024)) MiB |
| bundle size | $size1 bytes | |
| published by the far side's worker after the import | $pub_secs s | (aptly publishes on request) |
| the far side's \`Packages\` identical to the source's | $same | |
| the import run again (nothing to do) | $again_secs s | |

Export: $ex_said. Import: $im_said.

**Incremental**, $INCR packages added and exported \`--since\` the first export: **$inc_secs s**
(peak RSS $((inc_rss / 1024)) MiB; $inc_said), imported in **$inc_im s** ($inc_im_said).
Its size: **$size2 bytes** in $files2 files = the $INCR new blobs ($new_bytes bytes) + the
manifest ($manifest2 bytes, listing all $((COUNT + INCR)) components) + its signature ($sig2 bytes)
$( [ "$size2" -eq $((new_bytes + manifest2 + sig2)) ] && echo "— exactly." || echo "— NOT equal: investigate.")
EOF
log "wrote $OUT"
