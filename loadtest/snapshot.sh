#!/usr/bin/env bash
# A snapshot of a large APT repository (#42), side by side with aptly: COUNT generated .deb
# files in a hosted repository of one server at the default configuration (embedded default:
# SQLite, file blobs; filled by `import apt` from aptly's publication of the same files), then
# RUNS snapshots made through the API (`POST /api/v1/repositories/debs/snapshots`), the storage
# they add, and the first `apt-get update` from a snapshot's URL beside one from the
# repository's. Beside it, aptly's way to a point-in-time view clients install from: `aptly
# snapshot create … from repo`, then `aptly publish snapshot` (a snapshot is not served until it
# is published), its storage, and `apt-get update` from the published snapshot (served by a
# static file server). Release builds. Writes docs/perf/snapshot-peer.md (OUT=).
#
#   loadtest/snapshot.sh
#
# Environment: COUNT (100000), BYTES (payload of each package, 2048), RUNS (3), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
COUNT=${COUNT:-100000}
BYTES=${BYTES:-2048}
RUNS=${RUNS:-3}
OUT=${OUT:-docs/perf/snapshot-peer.md}

name=snapshot
# shellcheck source=loadtest/common.sh
. loadtest/common.sh
command -v aptly >/dev/null || { echo "aptly is needed (apt-get install aptly)" >&2; exit 1; }

elapsed() { python3 -c "import time; print(f'{time.time()-$1:.2f}')"; }
size_of() { du -sb "$1" | cut -f1; }
mib() { python3 -c "print(f'{$1/1048576:.1f}')"; }

log "generating $COUNT packages of $BYTES bytes"
"$lt" fixture apt --out "$work/debs" --count "$COUNT" --name frozen --bytes "$BYTES"
conf=$work/aptly.conf
printf '{"rootDir": "%s", "architectures": ["amd64"]}\n' "$work/aptly" >"$conf"
aptly_() { HOME=$work aptly -config="$conf" "$@" >/dev/null; }
log "aptly: repo add"
aptly_ repo create -distribution=stable -component=main src
aptly_ repo add src "$work/debs"
aptly_ publish repo -skip-signing -architectures=amd64 src
public=$work/aptly/public

pw=snapshot-admin
port=$(free_port); mport=$(free_port)
mkdir -p "$work/p"
(cd "$work/p" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
  PACKYARD_SERVER__BIND=127.0.0.1:$port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$mport \
  "$api" >"$work/p.log" 2>&1) &
pid=$!
wait_http "http://127.0.0.1:$mport/readyz"
p=http://127.0.0.1:$port
curl -fsS -u admin:$pw -H 'content-type: application/json' "$p/api/v1/repositories" \
  -d '{"name":"debs","format":"apt","type":"hosted","apt":{"distribution":"stable","components":["main"],"architectures":["amd64"]}}' >/dev/null
log "filling the repository"
(cd "$work/p" && "$api" import apt --from "$public" --into debs >/dev/null)
for _ in $(seq 1 3000); do
  n=$(curl -fsS "$p/repository/debs/dists/stable/main/binary-amd64/Packages" 2>/dev/null | grep -c '^Package: ' || true)
  [ "$n" -ge "$COUNT" ] && break
  sleep 0.2
done
[ "$n" -ge "$COUNT" ] || { echo "the repository never listed $COUNT packages" >&2; exit 1; }

# A scratch apt configuration for one source; prints the seconds of its first `apt-get update`.
apt_update() { # dir url
  local d=$1
  mkdir -p "$d"/etc/apt/{sources.list.d,preferences.d,apt.conf.d,trusted.gpg.d} "$d"/var/lib/apt/lists/partial \
    "$d"/var/cache/apt/archives/partial "$d"/var/lib/dpkg
  : >"$d/var/lib/dpkg/status"
  echo "deb [trusted=yes] $2 stable main" >"$d/etc/apt/sources.list"
  local t0
  t0=$(date +%s.%N)
  apt-get -q -o Dir="$d" -o Dir::State::status="$d/var/lib/dpkg/status" -o Debug::NoLocking=1 \
    -o APT::Architecture=amd64 -o Acquire::Languages=none -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false \
    update >"$d.log" 2>&1 || { cat "$d.log" >&2; exit 1; }
  grep -q '^E:' "$d.log" && { cat "$d.log" >&2; exit 1; }
  elapsed "$t0"
}

log "Packyard: $RUNS snapshots"
p_before=$(size_of "$work/p")
p_blobs_before=$(size_of "$work/p/data/blobs" 2>/dev/null || echo 0)
p_make=()
for i in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N)
  curl -fsS -u admin:$pw -H 'content-type: application/json' "$p/api/v1/repositories/debs/snapshots" \
    -d "{\"name\":\"s$i\"}" >"$work/made.json"
  p_make+=("$(elapsed "$t0")")
done
files=$(python3 -c "import json; print(json.load(open('$work/made.json'))['files'])")
p_after=$(size_of "$work/p")
p_blobs_after=$(size_of "$work/p/data/blobs" 2>/dev/null || echo 0)
p_snap_update=$(apt_update "$work/apt-p-snap" "$p/repository/debs/-/snapshots/s1")
p_repo_update=$(apt_update "$work/apt-p-repo" "$p/repository/debs")

log "aptly: $RUNS snapshots, each published"
a_before=$(size_of "$work/aptly")
a_make=(); a_pub=()
for i in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N)
  aptly_ snapshot create "s$i" from repo src
  a_make+=("$(elapsed "$t0")")
  t0=$(date +%s.%N)
  aptly_ publish snapshot -skip-signing -distribution=stable "s$i" "s$i"
  a_pub+=("$(elapsed "$t0")")
done
a_after=$(size_of "$work/aptly")
aport=$(free_port)
(cd "$public" && exec python3 -m http.server "$aport" --bind 127.0.0.1 >/dev/null 2>&1) &
static=$!
wait_http "http://127.0.0.1:$aport/s1/dists/stable/Release"
a_snap_update=$(apt_update "$work/apt-a-snap" "http://127.0.0.1:$aport/s1")
kill "$static" 2>/dev/null || true

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
pm=$(median "${p_make[@]}"); am=$(median "${a_make[@]}"); ap=$(median "${a_pub[@]}")
ratio() { python3 -c "print(f'{$1/$2:.1f}')"; }
cat >"$OUT" <<EOF
# A snapshot of a $COUNT-package APT repository, beside aptly

\`loadtest/snapshot.sh\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d):
$COUNT generated \`.deb\` files of $BYTES payload bytes in one hosted APT repository
(\`stable\`/\`main\`/\`amd64\`), on a Packyard server at the default configuration (SQLite, file
blobs; filled by \`import apt\` from aptly's publication of the same files) and in an aptly root.
$RUNS snapshots each, one after the other. A Packyard snapshot is served the moment it is made
(\`/repository/debs/-/snapshots/<name>/\`); an aptly snapshot is served once it is published, so
aptly's time to a snapshot clients can use is \`snapshot create\` plus \`publish snapshot\`.
\`apt-get update\` runs from an empty scratch state (\`[trusted=yes]\` on both sides; aptly's
publication served by \`python3 -m http.server\`).

| | Packyard | aptly |
|---|---|---|
| make a snapshot (runs) | ${p_make[*]} s | create ${a_make[*]} s + publish ${a_pub[*]} s |
| make a snapshot (median) | **$pm s** | $am s + $ap s = $(python3 -c "print(f'{$am+$ap:.2f}')") s |
| → ratio (aptly / Packyard) | **$(ratio "$(python3 -c "print($am+$ap)")" "$pm")×** | |
| files a snapshot lists | $files | |
| storage added by $RUNS snapshots | $(mib $((p_after - p_before))) MiB (blobs: $(mib $((p_blobs_after - p_blobs_before))) MiB) | $(mib $((a_after - a_before))) MiB |
| first \`apt-get update\` from a snapshot | $p_snap_update s | $a_snap_update s |
| first \`apt-get update\` from the repository itself | $p_repo_update s | |

Storage is \`du -sb\` of the instance's directory (Packyard: database and blobs; aptly: its root,
database, pool and publications) before and after. Packyard copies no package bytes: a snapshot
is rows naming blobs; aptly's snapshot is a database entry, and publishing it writes its index
files (the pool is shared by hard links).
EOF
log "wrote $OUT"
