#!/usr/bin/env bash
# Index storage: what a group's index snapshots take in the store after 100 publications, and
# how big its Packages.xz is beside one xz stream of the same text. Two shapes, on one server at
# the default configuration (embedded default: SQLite, file blobs, log level info) but for
# `proxy.allow_private_addresses` (the machine's Debian mirror) and `worker.usage_refresh_secs`
# (5: the count is read sooner; it changes nothing that is counted):
#   - the trial's: a group `all` serving bookworm of a hosted `local` (distribution `stable`)
#     and a proxy of Debian bookworm main (amd64, ~63,000 packages); PUBLICATIONS uploads into
#     `local`, each waited for through the group;
#   - a group `big-all` over a hosted `big` of BIG packages; PUBLICATIONS uploads into `big`
#     itself, so that every publication merges the large member again.
# For each: the group's index bytes (`usage.index_bytes`: every blob its retained snapshots
# hold, each once) after its first publication and after the others — all of them retained, as
# they are within `worker.snapshot_grace_secs` — and the ratio. Writes docs/perf/index-storage.md
# (OUT= to change).
#
#   loadtest/index-storage.sh
#
# Environment: PUBLICATIONS (100), BIG (60000), MIRROR (http://deb.debian.org/debian/), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PUBLICATIONS=${PUBLICATIONS:-100}
BIG=${BIG:-60000}
MIRROR=${MIRROR:-http://deb.debian.org/debian/}
OUT=${OUT:-docs/perf/index-storage.md}

name=index-storage
# shellcheck source=loadtest/common.sh
. loadtest/common.sh

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || { echo "no $keyring (the debian-archive-keyring package)" >&2; exit 2; }
export GNUPGHOME=$work/gnupg
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
debian_key=$(gpg --batch --quiet --no-default-keyring --keyring "$keyring" --export --armor)

pw=storage-admin
p_port=$(free_port); m_port=$(free_port)
mkdir -p "$work/p"
(cd "$work/p" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
  PACKYARD_SERVER__BIND=127.0.0.1:$p_port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$m_port \
  PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES=true PACKYARD_WORKER__USAGE_REFRESH_SECS=5 \
  "$api" >"$work/p.log" 2>&1) &
pid=$!
wait_http "http://127.0.0.1:$m_port/readyz"
url=http://127.0.0.1:$p_port
create() { curl -fsS -u admin:$pw -H 'content-type: application/json' "$url/api/v1/repositories" -d "$1" >/dev/null; }
# The group's index bytes once the worker has counted what its snapshots hold now (two counts
# after the last publication, 5 s apart, that agree).
index_bytes() {
  local last=-1 now deadline=$((SECONDS + 300))
  sleep 6
  while :; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "the usage of $1 did not settle within 300 s" >&2; exit 1; }
    now=$(curl -fsS -u admin:$pw "$url/api/v1/repositories/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("usage",{}).get("index_bytes",-1))')
    [ "$now" = "$last" ] && [ "$now" != -1 ] && { echo "$now"; return; }
    last=$now
    sleep 5.5
  done
}
# Packages.xz of group $1 (dist $2): its size, the size of one xz stream (xz's default preset,
# Debian's) of the same text, and the text's size.
xz_sizes() {
  local base="$url/repository/$1/dists/$2/main/binary-amd64"
  curl -fsS -o "$work/Packages.xz" "$base/Packages.xz"
  curl -fsS -o "$work/Packages" "$base/Packages"
  xz -dc "$work/Packages.xz" | cmp -s - "$work/Packages" || { echo "Packages.xz does not hold Packages" >&2; exit 1; }
  echo "$(stat -c %s "$work/Packages.xz") $(xz -6 -T1 -c "$work/Packages" | wc -c) $(stat -c %s "$work/Packages")"
}
ratio() { python3 -c 'import sys; print("%.2f" % (int(sys.argv[1]) / int(sys.argv[2])))' "$1" "$2"; }

log "the trial's shape: local (stable) and a proxy of Debian bookworm main under all"
create '{"name":"local","format":"apt","type":"hosted","apt":{"distributions":["stable"],"components":["main"],"architectures":["amd64","all"]}}'
create "$(python3 -c 'import json,sys; print(json.dumps({"name":"debian","format":"apt","type":"proxy",
  "apt":{"distributions":["bookworm"],"signed_by":sys.argv[1]},"proxy":{"remote_url":sys.argv[2]}}))' "$debian_key" "$MIRROR")"
curl -fsS -o /dev/null "$url/repository/debian/dists/bookworm/InRelease"
create '{"name":"all","format":"apt","type":"group","group":{"members":["local","debian"]},"apt":{"distributions":["bookworm"],"components":["main"],"architectures":["amd64"]}}'
until curl -fsS -o /dev/null "$url/repository/all/dists/bookworm/InRelease" 2>/dev/null; do sleep 0.1; done
trial_one=$(index_bytes all)
read -r trial_xz trial_single trial_text < <(xz_sizes all bookworm)
log "one snapshot: $trial_one bytes; Packages.xz $trial_xz, one stream $trial_single"
"$lt" visible --target "$url/repository/local/" --watch "$url/repository/all/" --dist bookworm \
  --auth "admin:$pw" --samples "$PUBLICATIONS" --pause-ms 0 --output "$work/trial.json" >/dev/null
trial_after=$(index_bytes all)
log "after $PUBLICATIONS publications: $trial_after bytes"

log "a group over $BIG packages in one hosted member that changes"
create '{"name":"big","format":"apt","type":"hosted","apt":{"architectures":["amd64"]}}'
"$lt" visible --target "$url/repository/big/" --auth "admin:$pw" --seed "$BIG" --samples 1 --pause-ms 0 >/dev/null
create '{"name":"big-all","format":"apt","type":"group","group":{"members":["big"]},"apt":{"architectures":["amd64"]}}'
until curl -fsS -o /dev/null "$url/repository/big-all/dists/stable/InRelease" 2>/dev/null; do sleep 0.1; done
big_one=$(index_bytes big-all)
read -r big_xz big_single big_text < <(xz_sizes big-all stable)
read -r hosted_xz hosted_single hosted_text < <(xz_sizes big stable)
"$lt" visible --target "$url/repository/big/" --watch "$url/repository/big-all/" \
  --auth "admin:$pw" --samples "$PUBLICATIONS" --pause-ms 0 --output "$work/big.json" >/dev/null
big_after=$(index_bytes big-all)
log "one snapshot: $big_one bytes; after $PUBLICATIONS publications: $big_after"

snapshots=$(sqlite3 "$work/p/data/packyard.db" "SELECT u.repository_id, COUNT(*) FROM snapshots s JOIN publication_units u ON u.id = s.unit_id JOIN repositories r ON r.id = u.repository_id WHERE r.name IN ('all', 'big-all') GROUP BY u.repository_id ORDER BY u.repository_id" 2>/dev/null | cut -d'|' -f2 | paste -sd/ || echo "?")

mib() { python3 -c 'import sys; print("%.1f" % (int(sys.argv[1]) / 1048576))' "$1"; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
{
  echo "# Index storage"
  echo
  echo "Generated by \`loadtest/index-storage.sh\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r), Packyard"
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo +changes) (release build, **the default configuration** — embedded default, SQLite and local"
  echo "files, log level info — but for \`proxy.allow_private_addresses = true\`, which the machine's Debian mirror needs, and"
  echo "\`worker.usage_refresh_secs = 5\`, so that the count is read sooner)."
  echo
  echo "A group's index bytes: every blob its retained snapshots hold, each once (\`usage.index_bytes\`), after its"
  echo "first publication and after $PUBLICATIONS more, one per upload, each waited for through the group. Snapshots"
  echo "retained at the end, per group: $snapshots (of $((PUBLICATIONS + 1)) each; a snapshot superseded less than"
  echo "\`worker.snapshot_grace_secs\` ago is kept)."
  echo
  echo "| shape | one snapshot | after $PUBLICATIONS publications | ratio |"
  echo "|---|---|---|---|"
  echo "| trial: \`local\` (stable) + proxy of Debian bookworm main under \`all\`, uploads into \`local\` | $(mib "$trial_one") MiB | $(mib "$trial_after") MiB | $(ratio "$trial_after" "$trial_one") |"
  echo "| \`big-all\` over hosted \`big\` ($BIG packages), uploads into \`big\` | $(mib "$big_one") MiB | $(mib "$big_after") MiB | $(ratio "$big_after" "$big_one") |"
  echo
  echo "\`Packages.xz\` beside one xz stream (\`xz -6\`, xz's default and Debian's) of the same \`Packages\` text:"
  echo
  echo "| index | text | Packages.xz | one xz stream | ratio |"
  echo "|---|---|---|---|---|"
  echo "| \`all\` bookworm (the Debian member's stanzas and \`local\`'s) | $trial_text | $trial_xz | $trial_single | $(ratio "$trial_xz" "$trial_single") |"
  echo "| \`big-all\` stable | $big_text | $big_xz | $big_single | $(ratio "$big_xz" "$big_single") |"
  echo "| hosted \`big\` stable | $hosted_text | $hosted_xz | $hosted_single | $(ratio "$hosted_xz" "$hosted_single") |"
  echo
  echo "Reproduce: \`loadtest/index-storage.sh\` (PUBLICATIONS=$PUBLICATIONS BIG=$BIG)."
} >"$OUT"
cat "$OUT"
