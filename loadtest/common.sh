# Sourced by the measuring scripts that start one Packyard server at a time (rss.sh,
# visibility.sh): builds the release binaries, makes the scratch directory $work (removed on
# exit, with the server $pid killed) and the helpers they share. Set $name first (the scratch
# directory's name).
log() { echo "==> $*" >&2; }

if [ "${PREBUILT:-0}" = 1 ]; then
  log "using the release binaries as built (PREBUILT=1)"
else
  log "building release binaries"
  cargo build --release -q -p packyard-api -p packyard-loadtest
fi
api=$root/target/release/packyard-api
lt=$root/target/release/packyard-loadtest

work=$(mktemp -d "/tmp/packyard-$name.XXXXXX")
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {
  for _ in $(seq 1 200); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "$1 did not come up" >&2; return 1
}
