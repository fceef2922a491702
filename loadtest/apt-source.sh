#!/usr/bin/env bash
# `apt-get source` against `apt-get download` of a package of the same size, both from one
# hosted Packyard repository at its default configuration, timed side by side with hyperfine:
#   loadtest/apt-source.sh
# Builds the release binary, starts Packyard in a scratch directory, uploads the real source
# package of `hello` (from target/test-srcs, which ./scripts/test.sh fills) and a generated .deb
# whose size is the source package's four files together, then times, each in a fresh download
# directory:
#   apt-get source --download-only hello     (the .dsc, .orig.tar.gz, .asc, .debian.tar.xz)
#   apt-get source hello                     (and dpkg-source unpacking it)
#   apt-get download big                     (one .deb of the same bytes in all)
# Environment: RUNS (20).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
RUNS=${RUNS:-20}
log() { echo "==> $*" >&2; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
need=()
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v dpkg-source >/dev/null || need+=(dpkg-dev)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
srcs=$root/target/test-srcs
ls "$srcs"/hello_*.dsc >/dev/null 2>&1 || { echo "no hello source in $srcs: run ./scripts/test.sh first" >&2; exit 2; }

log "building the release binary"
cargo build --release -q -p packyard-api
api=$root/target/release/packyard-api

work=$(mktemp -d /tmp/packyard-apt-source.XXXXXX)
pid=""
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pw=bench-admin
p_port=$(free_port); m_port=$(free_port)
mkdir -p "$work/packyard"
(cd "$work/packyard" && PACKYARD_SECURITY__ADMIN_PASSWORD=$pw \
  PACKYARD_SERVER__BIND=127.0.0.1:$p_port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$m_port \
  exec "$api" >"$work/packyard.log" 2>&1) &
pid=$!
for _ in $(seq 1 200); do curl -fsS -o /dev/null "http://127.0.0.1:$m_port/readyz" 2>/dev/null && break; sleep 0.05; done
pk=http://127.0.0.1:$p_port
curl -fsS -u admin:$pw -H 'content-type: application/json' "$pk/api/v1/repositories" \
  -d '{"name":"debs","format":"apt","type":"hosted","apt":{"distribution":"bookworm","components":["main"],"architectures":["amd64","all"]}}' >/dev/null

log "uploading hello's source package and a .deb of the same size"
args=()
for f in "$srcs"/hello_*; do args+=(-F "apt.asset=@$f"); done
curl -fsS -u admin:$pw "${args[@]}" "$pk/repository/debs/?wait=true" >/dev/null
total=$(cat "$srcs"/hello_* | wc -c)
mkdir -p "$work/big/DEBIAN" "$work/big/usr/share/big"
printf 'Package: big\nVersion: 1.0\nArchitecture: all\nMaintainer: Bench <bench@example.org>\nDescription: as large as the source package\n' >"$work/big/DEBIAN/control"
head -c $((total - 900)) /dev/urandom >"$work/big/usr/share/big/data"
dpkg-deb -Zgzip --root-owner-group --build "$work/big" "$work/big.deb" >/dev/null
curl -fsS -u admin:$pw --data-binary "@$work/big.deb" "$pk/repository/debs/?wait=true" >/dev/null

apt_root=$work/apt
mkdir -p "$apt_root/state/lists/partial" "$apt_root/cache/archives/partial" "$apt_root/dl"
: >"$apt_root/state/status"
curl -fsS "$pk/repository/debs/gpg.key" >"$apt_root/key.asc"
printf 'deb [signed-by=%s] %s bookworm main\ndeb-src [signed-by=%s] %s bookworm main\n' \
  "$apt_root/key.asc" "$pk/repository/debs" "$apt_root/key.asc" "$pk/repository/debs" >"$apt_root/sources.list"
apt="apt-get -qq -o Dir::Etc::SourceList=$apt_root/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State=$apt_root/state -o Dir::State::status=$apt_root/state/status -o Dir::Cache=$apt_root/cache -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
$apt update
echo "source package: $(ls "$srcs"/hello_* | wc -l) files, $total bytes; big.deb: $(wc -c <"$work/big.deb") bytes"

cd "$apt_root/dl"
hyperfine -N --runs "$RUNS" --warmup 3 --prepare "sh -c 'rm -rf $apt_root/dl/*'" \
  --export-markdown "$work/result.md" \
  -n 'apt-get download big (one .deb)' "$apt download big" \
  -n 'apt-get source --download-only hello (4 files)' "$apt source --download-only hello" \
  -n 'apt-get source hello (and unpack)' "$apt source hello"
cat "$work/result.md"
