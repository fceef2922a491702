#!/usr/bin/env bash
# Side-by-side baseline of one format on loopback, written to docs/perf/<format>.md:
#   loadtest/baseline.sh apt|apk|go|conan
# Builds the release binaries, starts Packyard (embedded default) in a scratch directory,
# uploads a deterministic generated 4 MiB package, copies the same bytes into a directory served
# by nginx (the static-file ceiling), starts the format's peer (aptly serve for APT; APK has
# none that installs here), runs
# packyard-loadtest against them, and stops everything it started.
# Environment: REQUESTS (2000: rounds of 250 sub-millisecond requests last ~5 ms, too short to be steady), CONCURRENCY (16), ROUNDS (3), WARMUP_REQUESTS (2000),
# WARMUP_SECONDS (5), UPLOAD_REQUESTS (64), LOG_LEVEL (info: the default configuration, an access
# line per request; warn: none, writes docs/perf/<format>-warn.md), OUT (docs/perf/<format>.md).
set -euo pipefail

format=${1:-}
case "$format" in apt|apk|go|conan) ;; *) echo "usage: $0 apt|apk|go|conan" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
root=$PWD
REQUESTS=${REQUESTS:-2000}
CONCURRENCY=${CONCURRENCY:-16}
ROUNDS=${ROUNDS:-3}
WARMUP_REQUESTS=${WARMUP_REQUESTS:-2000}
WARMUP_SECONDS=${WARMUP_SECONDS:-5}
UPLOAD_REQUESTS=${UPLOAD_REQUESTS:-64}
LOG_LEVEL=${LOG_LEVEL:-info}
if [ "$LOG_LEVEL" = info ]; then
  OUT=${OUT:-docs/perf/$format.md}
  level_env=()   # nothing set: the configuration a user gets
  level_text="log level info: the default configuration"
else
  OUT=${OUT:-docs/perf/$format-$LOG_LEVEL.md}
  level_env=("PACKYARD_LOG__LEVEL=$LOG_LEVEL")
  level_text="log level $LOG_LEVEL, not the default"
fi
log() { echo "==> $*" >&2; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
need=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
[ "$format" != apt ] || command -v aptly >/dev/null || need+=(aptly)
command -v gpg >/dev/null || need+=(gnupg)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

log "building release binaries"
cargo build --release -q -p packyard-api -p packyard-loadtest
api=$root/target/release/packyard-api
lt=$root/target/release/packyard-loadtest

work=$(mktemp -d /tmp/packyard-baseline.XXXXXX)
chmod 755 "$work"   # nginx workers run as another user
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {
  for _ in $(seq 1 200); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "$1 did not come up" >&2; return 1
}

# Packyard, embedded default, at LOG_LEVEL.
pw=baseline-admin
p_port=$(free_port); m_port=$(free_port)
mkdir -p "$work/packyard"
(cd "$work/packyard" && exec env -u PACKYARD_LOG__LEVEL PACKYARD_SECURITY__ADMIN_PASSWORD=$pw ${level_env[@]+"${level_env[@]}"} \
  PACKYARD_SERVER__BIND=127.0.0.1:$p_port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$m_port \
  "$api" >"$work/packyard.log" 2>&1) &
pids+=($!)
wait_http "http://127.0.0.1:$m_port/readyz"
pk=http://127.0.0.1:$p_port

n_port=$(free_port)
www=$work/www
# shellcheck source=loadtest/nginx.sh
. loadtest/nginx.sh

if [ "$format" = conan ]; then
  # The client (the tests' pin) and the peer (conan-server has no 2.34: its newest, in its own
  # virtualenv, since it ships a client tree of its own).
  venv() { [ -x "$1/bin/python" ] || python3 -m venv "$1"; "$1/bin/pip" install -q "$2"; }
  venv "$root/target/baseline-conan-client" "conan==2.34.0"
  venv "$root/target/baseline-conan-server" "conan-server==2.33.0"
  conan="$root/target/baseline-conan-client/bin/conan"
  export CONAN_HOME=$work/conan-home
  curl -fsS -u admin:$pw -H 'content-type: application/json' "$pk/api/v1/repositories" \
    -d '{"name":"conan-local","format":"conan","type":"hosted"}' >/dev/null
  # conan_server: generate its configuration, then allow writes for a user.
  c_port=$(free_port)
  (timeout 5 "$root/target/baseline-conan-server/bin/conan_server" -d "$work/conan-server" >/dev/null 2>&1 || true)
  python3 - "$work/conan-server/server.conf" "$c_port" <<'PY'
import re, sys
path, port = sys.argv[1], sys.argv[2]
s = open(path).read()
s = re.sub(r"(?m)^port: .*$", "port: " + port, s)
s = s.replace("[write_permissions]", "[write_permissions]\n*/*@*/*: *")
s = re.sub(r"(?ms)^\[users\].*?(?=^\[|\Z)", "[users]\nbench: bench\n\n", s)
open(path, "w").write(s)
PY
  ("$root/target/baseline-conan-server/bin/conan_server" -d "$work/conan-server" >"$work/conan-server.log" 2>&1) &
  pids+=($!)
  wait_http "http://127.0.0.1:$c_port/v1/ping"
  "$conan" profile detect >/dev/null 2>&1
  "$conan" remote add packyard "$pk/repository/conan-local" >/dev/null
  "$conan" remote add conan_server "http://127.0.0.1:$c_port" >/dev/null
  "$conan" remote login packyard admin -p "$pw" >/dev/null
  "$conan" remote login conan_server bench -p bench >/dev/null
  # A package whose one file is a deterministic 4 MiB payload.
  mkdir -p "$work/bench"
  "$lt" fixture go --out "$work/bench/payload.bin" --bytes $((4 * 1024 * 1024))
  cat >"$work/bench/conanfile.py" <<'PY'
from conan import ConanFile
from conan.tools.files import copy


class Bench(ConanFile):
    name = "bench"
    version = "1.0"
    exports_sources = "payload.bin"

    def package(self):
        copy(self, "payload.bin", self.source_folder, self.package_folder)
PY
  (cd "$work/bench" && "$conan" create . >/dev/null 2>&1)
  "$conan" upload "bench/1.0" -r packyard -c >/dev/null
  "$conan" upload "bench/1.0" -r conan_server -c >/dev/null
  ref=v2/conans/bench/1.0/_/_
  rrev=$(curl -fsS "$pk/repository/conan-local/$ref/latest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
  pkgid=$(curl -fsS "$pk/repository/conan-local/$ref/revisions/$rrev/search" | python3 -c 'import json,sys; print(next(iter(json.load(sys.stdin))))')
  prev=$(curl -fsS "$pk/repository/conan-local/$ref/revisions/$rrev/packages/$pkgid/latest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
  pkgfile=$(curl -fsS "$pk/repository/conan-local/$ref/revisions/$rrev/packages/$pkgid/revisions/$prev/files" | python3 -c 'import json,sys; print([f for f in json.load(sys.stdin)["files"] if f.startswith("conan_package.t")][0])')
  file_path="$ref/revisions/$rrev/packages/$pkgid/revisions/$prev/files/$pkgfile"
  # (`revisions` is both a file and a directory on these paths: nginx serves `latest` and the
  # package file; `revisions` is compared with conan_server only.)
  for f in "$ref/latest" "$file_path"; do
    mkdir -p "$www/$(dirname "$f")"
    curl -fsS -o "$www/$f" "$pk/repository/conan-local/$f"
  done
  start_nginx "$ref/latest"
  common=(--requests "$REQUESTS" --concurrency "$CONCURRENCY" --rounds "$ROUNDS"
    --warmup-requests "$WARMUP_REQUESTS" --warmup-seconds "$WARMUP_SECONDS")
  log "packyard vs nginx (Conan)"
  "$lt" compare --target "packyard=$pk/repository/conan-local/" --target "nginx=http://127.0.0.1:$n_port/" "${common[@]}" \
    --scenario "get:$ref/latest" --scenario "cond:$ref/latest" \
    --scenario "get:$file_path" --scenario "range:$file_path" --scenario "head:$file_path" \
    --output "$work/nginx.json" --markdown "$work/nginx.md"
  log "packyard vs conan_server"
  "$lt" compare --target "packyard=$pk/repository/conan-local/" --target "conan_server=http://127.0.0.1:$c_port/" "${common[@]}" \
    --scenario "get:v1/ping" --scenario "get:v2/conans/search?q=bench" \
    --scenario "get:$ref/latest" --scenario "get:$ref/revisions" --scenario "get:$ref/revisions/$rrev/files" \
    --scenario "get:$ref/revisions/$rrev/packages/$pkgid/latest" --scenario "get:$ref/revisions/$rrev/packages/$pkgid/revisions" \
    --scenario "get:$ref/revisions/$rrev/packages/$pkgid/revisions/$prev/files" \
    --output "$work/peer.json" --markdown "$work/peer.md"
  # conan_server's development server resets connections when sixteen clients download the
  # 4 MiB file at once (three runs of 2026-12-03 stopped on it): the file is compared at a
  # concurrency it sustains.
  peer_file_concurrency=${PEER_FILE_CONCURRENCY:-4}
  log "packyard vs conan_server: the package file at concurrency $peer_file_concurrency"
  "$lt" compare --target "packyard=$pk/repository/conan-local/" --target "conan_server=http://127.0.0.1:$c_port/" \
    --requests "$REQUESTS" --concurrency "$peer_file_concurrency" --rounds "$ROUNDS" \
    --warmup-requests "$WARMUP_REQUESTS" --warmup-seconds "$WARMUP_SECONDS" \
    --scenario "get:$file_path" --output "$work/peer-file.json" --markdown "$work/peer-file.md"
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  {
    echo "# Conan serving: Packyard side by side with nginx and conan_server"
    echo
    echo "Generated by \`loadtest/baseline.sh conan\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r),"
    echo "$("$NGINX" -v 2>&1 | sed 's/.*: //'), conan_server 2.33.0 (PyPI \`conan-server\`, its own development server), Packyard"
    echo "$(git rev-parse --short HEAD) (release build, embedded default: SQLite and local files, $level_text). Everything on"
    echo "loopback on one shared machine: read the ratios, not the absolute figures. The fixture is \`bench/1.0\`,"
    echo "a package whose one file is a deterministic 4 MiB payload, uploaded by the conan 2.34 client to"
    echo "both servers; nginx serves the bytes Packyard published (\`latest\` and \`$pkgfile\`)."
    echo
    echo "Reproduce: \`loadtest/baseline.sh conan\` (REQUESTS=$REQUESTS CONCURRENCY=$CONCURRENCY ROUNDS=$ROUNDS WARMUP_REQUESTS=$WARMUP_REQUESTS WARMUP_SECONDS=$WARMUP_SECONDS)."
    echo
    echo "## Against nginx (the static-file ceiling)"
    echo
    cat "$work/nginx.md"
    echo
    echo "## Against conan_server"
    echo
    cat "$work/peer.md"
    echo
    echo "### The package file, at concurrency $peer_file_concurrency"
    echo
    echo "conan_server's development server resets connections when $CONCURRENCY clients download the"
    echo "4 MiB file at once, so the file is compared with it at a concurrency it sustains."
    echo
    cat "$work/peer-file.md"
  } >"$OUT"
  mkdir -p target/loadtest
  cp "$work/nginx.json" target/loadtest/conan-nginx.json
  cp "$work/peer.json" target/loadtest/conan-peer.json
  cp "$work/peer-file.json" target/loadtest/conan-peer-file.json
  log "wrote $OUT (raw results in target/loadtest/)"
  exit 0
fi

if [ "$format" = go ]; then
  for spec in '{"name":"gomods","format":"go","type":"hosted"}' '{"name":"goall","format":"go","type":"group","group":{"members":["gomods"]}}'; do
    curl -fsS -u admin:$pw -H 'content-type: application/json' "$pk/api/v1/repositories" -d "$spec" >/dev/null
  done
  m=example.com/bench
  for v in v1.0.0 v1.0.1 v1.1.0; do
    "$lt" fixture go --out "$work/$v.zip" --module $m --version $v --bytes $((1024 * 1024))
    curl -fsS -u admin:$pw -T "$work/$v.zip" "$pk/repository/gomods/$m/@v/$v.zip" >/dev/null
  done
  for f in "$m/@v/list" "$m/@latest" "$m/@v/v1.1.0.info" "$m/@v/v1.1.0.mod" "$m/@v/v1.1.0.zip"; do
    mkdir -p "$www/$(dirname "$f")"
    curl -fsS -o "$www/$f" "$pk/repository/gomods/$f"
  done
  start_nginx "$m/@v/list"
  common=(--requests "$REQUESTS" --concurrency "$CONCURRENCY" --rounds "$ROUNDS"
    --warmup-requests "$WARMUP_REQUESTS" --warmup-seconds "$WARMUP_SECONDS")
  log "packyard (hosted) vs nginx (Go)"
  "$lt" compare --target "packyard=$pk/repository/gomods/" --target "nginx=http://127.0.0.1:$n_port/" "${common[@]}" \
    --scenario "get:$m/@v/list" --scenario "get:$m/@v/v1.1.0.info" --scenario "get:$m/@v/v1.1.0.mod" \
    --scenario "get:$m/@v/v1.1.0.zip" --scenario "get:$m/@latest" \
    --output "$work/hosted.json" --markdown "$work/hosted.md"
  log "packyard (group) vs nginx (Go)"
  "$lt" compare --target "packyard-group=$pk/repository/goall/" --target "nginx=http://127.0.0.1:$n_port/" "${common[@]}" \
    --scenario "get:$m/@v/list" --scenario "get:$m/@latest" --scenario "get:$m/@v/v1.1.0.zip" \
    --output "$work/group.json" --markdown "$work/group.md"
  log "packyard publishes (Go)"
  "$lt" compare --target "packyard=$pk/repository/gomods/" --scenario upload:go --auth "admin:$pw" \
    --requests "$UPLOAD_REQUESTS" --concurrency "$CONCURRENCY" --rounds "$ROUNDS" --upload-warmup 16 \
    --upload-bytes $((1024 * 1024)) --output "$work/upload.json" --markdown "$work/upload.md"
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  {
    echo "# Go module serving: Packyard side by side with nginx"
    echo
    echo "Generated by \`loadtest/baseline.sh go\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r),"
    echo "$("$NGINX" -v 2>&1 | sed 's/.*: //'), Packyard $(git rev-parse --short HEAD) (release build, embedded default: SQLite and"
    echo "local files, $level_text). Everything on loopback on one shared machine: read the ratios, not"
    echo "the absolute figures. The fixture is \`example.com/bench\` at v1.0.0, v1.0.1 and v1.1.0, each zip"
    echo "holding \`go.mod\` and a 1 MiB incompressible payload (\`packyard-loadtest fixture go\`); nginx"
    echo "serves the bytes Packyard published (\`list\`, \`@latest\`, and v1.1.0's \`.info\`, \`.mod\`, \`.zip\`)."
    echo "The group has the hosted repository as its only member: its \`list\` and \`@latest\` come from its own"
    echo "snapshot, merged when the member publishes; each upload returns once the group has it too. No other"
    echo "Go module proxy installs from the registries reachable here."
    echo
    echo "Reproduce: \`loadtest/baseline.sh go\` (REQUESTS=$REQUESTS CONCURRENCY=$CONCURRENCY ROUNDS=$ROUNDS WARMUP_REQUESTS=$WARMUP_REQUESTS WARMUP_SECONDS=$WARMUP_SECONDS)."
    echo
    echo "## Hosted against nginx"
    echo
    cat "$work/hosted.md"
    echo
    echo "## Group against nginx"
    echo
    cat "$work/group.md"
    echo
    echo "## Publishing (distinct 1 MiB module zips; the PUT returns once \`list\` has the version)"
    echo
    cat "$work/upload.md"
  } >"$OUT"
  mkdir -p target/loadtest
  for f in hosted group upload; do cp "$work/$f.json" "target/loadtest/go-$f.json"; done
  log "wrote $OUT (raw results in target/loadtest/)"
  exit 0
fi

if [ "$format" = apk ]; then
  unit=v3.20/main/x86_64
  curl -fsS -u admin:$pw -H 'content-type: application/json' "$pk/api/v1/repositories" \
    -d '{"name":"alpine","format":"apk","type":"hosted","apk":{"architectures":["x86_64"]}}' >/dev/null
  "$lt" fixture apk --out "$work/packyard-bench-1.0-r0.apk" --bytes $((4 * 1024 * 1024))
  curl -fsS -u admin:$pw -T "$work/packyard-bench-1.0-r0.apk" "$pk/repository/alpine/$unit/packyard-bench-1.0-r0.apk?wait=true" >/dev/null
  apk_path=$unit/packyard-bench-1.0-r0.apk
  for f in "$unit/APKINDEX.tar.gz" "$apk_path"; do
    mkdir -p "$www/$(dirname "$f")"
    curl -fsS -o "$www/$f" "$pk/repository/alpine/$f"
  done
  start_nginx "$unit/APKINDEX.tar.gz"
  log "packyard vs nginx (APK)"
  "$lt" compare --target "packyard=$pk/repository/alpine/" --target "nginx=http://127.0.0.1:$n_port/" \
    --requests "$REQUESTS" --concurrency "$CONCURRENCY" --rounds "$ROUNDS" \
    --warmup-requests "$WARMUP_REQUESTS" --warmup-seconds "$WARMUP_SECONDS" \
    --scenario "get:$unit/APKINDEX.tar.gz" --scenario "head:$unit/APKINDEX.tar.gz" --scenario "cond:$unit/APKINDEX.tar.gz" \
    --scenario "get:$apk_path" --scenario "range:$apk_path" --scenario "head:$apk_path" \
    --output "$work/nginx.json" --markdown "$work/nginx.md"
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  {
    echo "# APK serving: Packyard side by side with nginx"
    echo
    echo "Generated by \`loadtest/baseline.sh apk\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r),"
    echo "$("$NGINX" -v 2>&1 | sed 's/.*: //'), Packyard $(git rev-parse --short HEAD) (release build, embedded default: SQLite and"
    echo "local files, $level_text). Everything on loopback on one shared machine: read the ratios, not"
    echo "the absolute figures. The fixture is one generated 4 MiB \`.apk\` (\`packyard-loadtest fixture apk\`)"
    echo "in \`$unit\`; nginx serves the bytes Packyard published (the signed \`APKINDEX.tar.gz\` and the"
    echo "package). No other APK server installs from the registries reachable here, so nginx is the only"
    echo "peer."
    echo
    echo "Reproduce: \`loadtest/baseline.sh apk\` (REQUESTS=$REQUESTS CONCURRENCY=$CONCURRENCY ROUNDS=$ROUNDS WARMUP_REQUESTS=$WARMUP_REQUESTS WARMUP_SECONDS=$WARMUP_SECONDS)."
    echo
    echo "## Against nginx (the static-file ceiling)"
    echo
    cat "$work/nginx.md"
  } >"$OUT"
  mkdir -p target/loadtest
  cp "$work/nginx.json" target/loadtest/apk-nginx.json
  log "wrote $OUT (raw results in target/loadtest/)"
  exit 0
fi

for repo in debs uploads; do
  curl -fsS -u admin:$pw -H 'content-type: application/json' "$pk/api/v1/repositories" \
    -d "{\"name\":\"$repo\",\"format\":\"apt\",\"type\":\"hosted\",\"apt\":{\"architectures\":[\"amd64\"]}}" >/dev/null
done
"$lt" fixture apt --out "$work/packyard-bench_1.0_amd64.deb" --bytes $((4 * 1024 * 1024))
curl -fsS -u admin:$pw --data-binary @"$work/packyard-bench_1.0_amd64.deb" "$pk/repository/debs/?wait=true" >/dev/null
deb_path=pool/main/p/packyard-bench/packyard-bench_1.0_amd64.deb

# nginx serving the same bytes (fetched from Packyard) with sendfile, keep-alive, open_file_cache.
for f in dists/stable/InRelease dists/stable/Release dists/stable/Release.gpg \
  dists/stable/main/binary-amd64/Packages dists/stable/main/binary-amd64/Packages.gz \
  dists/stable/main/binary-amd64/Packages.xz "$deb_path"; do
  mkdir -p "$www/$(dirname "$f")"
  curl -fsS -o "$www/$f" "$pk/repository/debs/$f"
done
start_nginx dists/stable/InRelease

# aptly: the same package in a published repository (signed with a throwaway key), served by
# `aptly serve`.
a_port=$(free_port)
export GNUPGHOME=$work/gnupg
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key 'aptly baseline <aptly@example.org>' rsa3072 sign never 2>/dev/null
key=$(gpg --batch --list-secret-keys --with-colons | awk -F: '/^fpr/ {print $10; exit}')
cat >"$work/aptly.conf" <<EOF
{"rootDir": "$work/aptly", "gpgProvider": "gpg", "gpgDisableSign": false, "gpgDisableVerify": false,
 "architectures": ["amd64"], "downloadConcurrency": 1}
EOF
aptly_run() { aptly -config="$work/aptly.conf" "$@"; }
aptly_run repo create -distribution=stable -component=main debs >/dev/null
aptly_run repo add debs "$work/packyard-bench_1.0_amd64.deb" >/dev/null
aptly_signed=yes
if ! aptly_run publish repo -architectures=amd64 -gpg-key="$key" -keyring="$GNUPGHOME/pubring.kbx" debs >"$work/aptly-publish.log" 2>&1; then
  log "aptly could not sign with gpg (see below); publishing unsigned, so InRelease is left out of the aptly comparison"
  cat "$work/aptly-publish.log" >&2
  aptly_run publish repo -architectures=amd64 -skip-signing debs >/dev/null
  aptly_signed=no
fi
(aptly -config="$work/aptly.conf" serve -listen="127.0.0.1:$a_port" >"$work/aptly.log" 2>&1) &
pids+=($!)
wait_http "http://127.0.0.1:$a_port/dists/stable/Release"

common=(--requests "$REQUESTS" --concurrency "$CONCURRENCY" --rounds "$ROUNDS"
  --warmup-requests "$WARMUP_REQUESTS" --warmup-seconds "$WARMUP_SECONDS")
packyard_t="packyard=$pk/repository/debs/"

log "packyard vs nginx"
"$lt" compare --target "$packyard_t" --target "nginx=http://127.0.0.1:$n_port/" "${common[@]}" \
  --scenario get:dists/stable/InRelease --scenario get:dists/stable/main/binary-amd64/Packages.gz \
  --scenario "get:$deb_path" --scenario "head:$deb_path" --scenario "range:$deb_path" \
  --scenario cond:dists/stable/InRelease --scenario cond:dists/stable/main/binary-amd64/Packages.gz \
  --output "$work/nginx.json" --markdown "$work/nginx.md"

log "packyard vs aptly serve"
aptly_scenarios=(--scenario get:dists/stable/main/binary-amd64/Packages.gz --scenario "get:$deb_path"
  --scenario "head:$deb_path" --scenario "range:$deb_path")
if [ "$aptly_signed" = yes ]; then aptly_scenarios=(--scenario get:dists/stable/InRelease "${aptly_scenarios[@]}"); fi
"$lt" compare --target "$packyard_t" --target "aptly=http://127.0.0.1:$a_port/" "${common[@]}" \
  "${aptly_scenarios[@]}" --output "$work/aptly.json" --markdown "$work/aptly.md"

log "packyard uploads"
"$lt" compare --target "packyard=$pk/repository/uploads/" --scenario upload:apt --auth "admin:$pw" \
  --requests "$UPLOAD_REQUESTS" --concurrency "$CONCURRENCY" --rounds "$ROUNDS" --upload-warmup 16 \
  --output "$work/upload.json" --markdown "$work/upload.md"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
{
  echo "# APT serving: Packyard side by side with nginx and aptly"
  echo
  echo "Generated by \`loadtest/baseline.sh apt\` on $(date -u +%Y-%m-%d) — $(nproc) × $cpu, $(uname -r),"
  echo "$("$NGINX" -v 2>&1 | sed 's/.*: //'), aptly $(aptly version | sed 's/.*: //'), Packyard $(git rev-parse --short HEAD) (release build, embedded default:"
  echo "SQLite and local files, $level_text). Everything on loopback on one shared machine: read the"
  echo "ratios, not the absolute figures. The fixture is one generated 4 MiB \`.deb\` (\`packyard-loadtest"
  echo "fixture apt\`); nginx serves the bytes Packyard published, aptly its own publication of the same"
  echo "package$( [ "$aptly_signed" = yes ] && echo ", signed with a throwaway RSA-3072 key" || echo " (unsigned: aptly could not sign here, so InRelease is not compared)")."
  echo
  echo "Reproduce: \`loadtest/baseline.sh apt\` (REQUESTS=$REQUESTS CONCURRENCY=$CONCURRENCY ROUNDS=$ROUNDS WARMUP_REQUESTS=$WARMUP_REQUESTS WARMUP_SECONDS=$WARMUP_SECONDS)."
  echo
  echo "## Against nginx (the static-file ceiling)"
  echo
  cat "$work/nginx.md"
  echo
  echo "## Against aptly serve"
  echo
  cat "$work/aptly.md"
  echo
  echo "## Uploads (distinct 4 MiB packages) and time to visibility in \`Packages\`"
  echo
  cat "$work/upload.md"
} >"$OUT"
mkdir -p target/loadtest
cp "$work"/*.json target/loadtest/
log "wrote $OUT (raw results in target/loadtest/)"
