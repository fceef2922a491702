#!/usr/bin/env bash
# A Packyard cluster on loopback: PostgreSQL, Redis and RabbitMQ (the machine's, started when
# stopped), an S3 test server (moto), two packyard-api replicas, one packyard-worker, and nginx
# balancing the replicas. Everything but the three machine services runs from $CLUSTER_DIR and
# stops with `down`.
#
#   deploy/local-cluster.sh up      # builds the release binaries unless CLUSTER_BIN_DIR is set
#   deploy/local-cluster.sh status
#   deploy/local-cluster.sh restart api1|api2|worker [TERM|KILL]   # gracefully, or as a crash
#   deploy/local-cluster.sh down
#
# Settings (environment):
#   CLUSTER_DIR      state, logs, pids, config             (target/local-cluster)
#   CLUSTER_PORT     nginx listens here; replicas, worker and S3 use the next ports (18080):
#                    +1/+2 api public, +11/+12 api management, +13 worker management, +20 S3
#   CLUSTER_DB       PostgreSQL database, created on up, dropped on down (packyard_cluster)
#   PG_URL           PostgreSQL server (postgres://postgres:postgres@127.0.0.1:5432/postgres)
#   REDIS_URL        (redis://127.0.0.1:6379/)     AMQP_URL (amqp://guest:guest@127.0.0.1:5672/%2f;
#                    "none": no RabbitMQ, the worker finds changes by polling)
#   CLUSTER_WORKER_POLL_MS  worker.poll_ms of every process (the default when unset)
#   CLUSTER_BIN_DIR  directory holding packyard-api and packyard-worker (built when unset)
#
# `up` writes $CLUSTER_DIR/cluster.env: LB_URL, API1_URL, API2_URL, the management URLs,
# S3_URL, ADMIN_PASSWORD — what tests and the load test read.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'local-cluster: %s\n' "$*" >&2; exit 1; }

dir=${CLUSTER_DIR:-$root/target/local-cluster}
base=${CLUSTER_PORT:-18080}
db=${CLUSTER_DB:-packyard_cluster}
pg=${PG_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}
redis=${REDIS_URL:-redis://127.0.0.1:6379/}
amqp=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
[[ $db =~ ^[a-z_][a-z0-9_]*$ ]] || die "CLUSTER_DB must be a plain lowercase identifier: $db"

lb_port=$base
api_ports=($((base + 1)) $((base + 2)))
mgmt_ports=($((base + 11)) $((base + 12)))
worker_mgmt=$((base + 13))
s3_port=$((base + 20))
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

tcp_up() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }
# host and port of a URL (scheme://[user[:pass]@]host[:port][/...]), with a default port.
url_host() { local r=${1#*://}; r=${r%%/*}; r=${r##*@}; echo "${r%%:*}"; }
url_port() { local r=${1#*://}; r=${r%%/*}; r=${r##*@}; [[ $r == *:* ]] && echo "${r##*:}" || echo "$2"; }
local_host() { [[ $1 == 127.0.0.1 || $1 == localhost ]]; }
wait_for() { # what, command...
  local what=$1; shift
  for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what did not come up (logs in $dir)"
}
http_ok() { curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

ensure_packages() {
  local need=()
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
  command -v curl >/dev/null || need+=(curl)
  command -v psql >/dev/null || need+=(postgresql-client)
  command -v redis-cli >/dev/null || need+=(redis-tools)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

# The machine's services are started when stopped; a remote one named by a URL must be up.
ensure_services() {
  local h p
  h=$(url_host "$pg"); p=$(url_port "$pg" 5432)
  if ! tcp_up "$p" "$h"; then
    local_host "$h" || die "PostgreSQL at $h:$p does not answer"
    log "starting PostgreSQL"
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start || true
    wait_for PostgreSQL tcp_up "$p" "$h"
  fi
  h=$(url_host "$redis"); p=$(url_port "$redis" 6379)
  if ! tcp_up "$p" "$h"; then
    local_host "$h" || die "Redis at $h:$p does not answer"
    log "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --save "" --appendonly no >/dev/null
    wait_for Redis tcp_up "$p" "$h"
  fi
  [ "$amqp" = none ] && return 0
  h=$(url_host "$amqp"); p=$(url_port "$amqp" 5672)
  if ! tcp_up "$p" "$h"; then
    local_host "$h" || die "RabbitMQ at $h:$p does not answer"
    log "starting RabbitMQ"
    $SUDO rabbitmq-server -detached >/dev/null 2>&1 || true
    wait_for RabbitMQ tcp_up "$p" "$h"
  fi
}

# wait_started NAME URL: until URL answers, as long as the process NAME is alive.
wait_started() {
  local name=$1 url=$2
  for _ in $(seq 1 300); do
    http_ok "$url" && return 0
    if ! pid_alive "$dir/pids/$name.pid"; then
      tail -n 20 "$dir/logs/$name.log" >&2 || true
      die "$name exited while starting (log: $dir/logs/$name.log)"
    fi
    sleep 0.2
  done
  die "$name did not answer $url (log: $dir/logs/$name.log)"
}

moto_bin() {
  if command -v moto_server >/dev/null; then command -v moto_server; return; fi
  local venv=$root/target/test-venv
  if [ ! -x "$venv/bin/moto_server" ]; then
    log "installing the S3 test server (moto) into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q "$(grep '^moto' scripts/test-requirements.txt)"
  fi
  echo "$venv/bin/moto_server"
}

binaries() {
  if [ -n "${CLUSTER_BIN_DIR:-}" ]; then
    bin=$CLUSTER_BIN_DIR
  else
    log "building the release binaries"
    cargo build --release -q -p packyard-api -p packyard-worker
    bin=$root/target/release
  fi
  [ -x "$bin/packyard-api" ] && [ -x "$bin/packyard-worker" ] || die "no packyard-api/packyard-worker in $bin"
}

# start NAME COMMAND... : runs in the background with its log and pid in $dir.
start() {
  local name=$1; shift
  # Appended to: a restarted process keeps what it said before the restart.
  (cd "$dir" && exec "$@" >>"$dir/logs/$name.log" 2>&1) &
  echo $! >"$dir/pids/$name.pid"
}

# The processes' environment: exactly the configuration file and the secrets, not the caller's.
cluster_env() {
  for v in $(compgen -e | grep '^PACKYARD_' || true); do unset "$v"; done
  # shellcheck disable=SC2046
  export PACKYARD_CONFIG="$dir/packyard.toml" $(cat "$dir/secrets.env")
}

# start_api I: replica I (0 or 1).
start_api() {
  local i=$1
  PACKYARD_SERVER__BIND=127.0.0.1:${api_ports[$i]} PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:${mgmt_ports[$i]} \
    PACKYARD_DATABASE__MIGRATE_ON_START=false start "api$((i + 1))" "$bin/packyard-api"
}

start_worker() {
  PACKYARD_DATABASE__MIGRATE_ON_START=false PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$worker_mgmt \
    start worker "$bin/packyard-worker"
}

# restart api1|api2|worker [TERM|KILL]: stops a process (gracefully, or as a crash) and starts
# it again.
restart() {
  local name=${1:-} signal=${2:-TERM} i=0
  if [[ $name =~ ^api([12])$ ]]; then
    i=$((BASH_REMATCH[1] - 1))
  elif [ "$name" != worker ]; then
    die "usage: $0 restart api1|api2|worker [TERM|KILL]"
  fi
  local f=$dir/pids/$name.pid
  [ -f "$dir/bin" ] || die "no cluster in $dir"
  bin=$(cat "$dir/bin")
  cluster_env
  pid_alive "$f" && kill -"$signal" "$(cat "$f")"
  for _ in $(seq 1 600); do pid_alive "$f" || break; sleep 0.05; done
  pid_alive "$f" && die "$name did not stop"
  if [ "$name" = worker ]; then
    start_worker
    wait_started worker "http://127.0.0.1:$worker_mgmt/readyz"
  else
    start_api "$i"
    wait_started "$name" "http://127.0.0.1:${mgmt_ports[$i]}/readyz"
  fi
  log "$name restarted (SIG$signal)"
}

up() {
  ensure_packages
  ensure_services
  binaries
  if [ -d "$dir/pids" ] && ls "$dir"/pids/*.pid >/dev/null 2>&1; then
    die "$dir already holds a cluster: run '$0 down' first"
  fi
  for p in "$lb_port" "${api_ports[@]}" "${mgmt_ports[@]}" "$worker_mgmt" "$s3_port"; do
    tcp_up "$p" && die "port $p is taken: choose another CLUSTER_PORT"
  done
  mkdir -p "$dir/logs" "$dir/pids" "$dir/nginx-tmp"
  # A new cluster starts new logs (a restart appends to its process's).
  rm -f "$dir"/logs/*.log
  chmod 755 "$dir"
  # A failed start leaves nothing running.
  trap 'rc=$?; if [ "$rc" != 0 ]; then log "up failed: stopping what started"; down; fi' EXIT

  log "database $db on $pg"
  psql "$pg" -qAtc "DROP DATABASE IF EXISTS $db" >/dev/null
  psql "$pg" -qAtc "CREATE DATABASE $db" >/dev/null
  local db_url=${pg%/*}/$db

  log "S3 test server on 127.0.0.1:$s3_port"
  local moto
  moto=$(moto_bin)
  start s3 "$moto" -H 127.0.0.1 -p "$s3_port"
  wait_started s3 "http://127.0.0.1:$s3_port/"
  curl -fsS -X PUT -o /dev/null "http://127.0.0.1:$s3_port/packyard" || die "could not create the bucket"

  local password secret
  password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)
  secret=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')
  # One configuration for every process; secrets and ports come from the environment.
  cat >"$dir/packyard.toml" <<EOF
[server]
data_dir = "$dir/data"

[database]
url = "$db_url"
max_connections = 8

[blobs]
kind = "s3"

[blobs.s3]
bucket = "packyard"
endpoint = "http://127.0.0.1:$s3_port"
region = "us-east-1"
access_key_id = "cluster"

[cache]
redis_url = "$redis"

$([ "$amqp" = none ] || printf '[events]\namqp_url = "%s"\n' "$amqp")

[worker]
embedded = false
$([ -z "${CLUSTER_WORKER_POLL_MS:-}" ] || echo "poll_ms = $CLUSTER_WORKER_POLL_MS")

[log]
format = "json"
EOF
  cat >"$dir/secrets.env" <<EOF
PACKYARD_SECURITY__SECRET=$secret
PACKYARD_SECURITY__ADMIN_PASSWORD=$password
PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY=cluster-secret
EOF
  chmod 600 "$dir/secrets.env"
  echo "$bin" >"$dir/bin"
  cluster_env

  log "migrations"
  "$bin/packyard-api" migrate >"$dir/logs/migrate.log" 2>&1 || { cat "$dir/logs/migrate.log" >&2; die "migration failed"; }

  start_api 0
  start_api 1
  start_worker
  wait_started api1 "http://127.0.0.1:${mgmt_ports[0]}/readyz"
  wait_started api2 "http://127.0.0.1:${mgmt_ports[1]}/readyz"
  wait_started worker "http://127.0.0.1:$worker_mgmt/readyz"

  # nginx: both replicas, the next one tried when one fails (a stopped replica costs no request
  # that could be retried), uploads streamed through unbuffered.
  local user=""
  [ "$(id -u)" = 0 ] && user="user root;"
  cat >"$dir/nginx.conf" <<EOF
$user
worker_processes 2;
pid $dir/pids/nginx.pid;
error_log $dir/logs/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log $dir/logs/nginx-access.log;
  client_body_temp_path $dir/nginx-tmp/body;
  proxy_temp_path $dir/nginx-tmp/proxy;
  fastcgi_temp_path $dir/nginx-tmp/fastcgi;
  uwsgi_temp_path $dir/nginx-tmp/uwsgi;
  scgi_temp_path $dir/nginx-tmp/scgi;
  upstream packyard {
    server 127.0.0.1:${api_ports[0]} max_fails=1 fail_timeout=1s;
    server 127.0.0.1:${api_ports[1]} max_fails=1 fail_timeout=1s;
    keepalive 32;
  }
  server {
    listen 127.0.0.1:$lb_port;
    client_max_body_size 1g;
    location / {
      proxy_pass http://packyard;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_request_buffering off;
      # Responses stream to the client as they arrive (no temp files, no waiting for the whole
      # body), through one 256 KiB buffer per request: nginx's default is one page (4 KiB), which
      # costs a read and a write per 4 KiB and held a 4 MiB download to 0.13x of a replica
      # reached directly; 256 KiB gives 0.57-0.59x on one shared two-core machine (docs/operations.md,
      # "Load balancer").
      proxy_buffering off;
      proxy_buffer_size 256k;
      proxy_buffers 4 256k;
      proxy_connect_timeout 2s;
      proxy_read_timeout 300s;
      proxy_next_upstream error timeout http_502 http_503;
      proxy_next_upstream_tries 2;
    }
  }
}
EOF
  local nginx
  nginx=$(command -v nginx || echo /usr/sbin/nginx)
  "$nginx" -c "$dir/nginx.conf" -g 'daemon on;' || { cat "$dir/logs/nginx-error.log" >&2; die "nginx failed"; }
  wait_for nginx http_ok "http://127.0.0.1:$lb_port/api/v1/openapi.json"

  cat >"$dir/cluster.env" <<EOF
LB_URL=http://127.0.0.1:$lb_port
API1_URL=http://127.0.0.1:${api_ports[0]}
API2_URL=http://127.0.0.1:${api_ports[1]}
API1_MANAGEMENT_URL=http://127.0.0.1:${mgmt_ports[0]}
API2_MANAGEMENT_URL=http://127.0.0.1:${mgmt_ports[1]}
WORKER_MANAGEMENT_URL=http://127.0.0.1:$worker_mgmt
S3_URL=http://127.0.0.1:$s3_port
DATABASE_URL=$db_url
ADMIN_PASSWORD=$password
EOF
  trap - EXIT
  status
  log "admin password: $password (also in $dir/cluster.env)"
}

status() {
  local any=0
  for f in "$dir"/pids/*.pid; do
    [ -e "$f" ] || continue
    any=1
    local name
    name=$(basename "$f" .pid)
    if pid_alive "$f"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: stopped"; fi
  done
  [ "$any" = 1 ] || { echo "no cluster in $dir"; return 0; }
  [ -f "$dir/cluster.env" ] && grep -v PASSWORD "$dir/cluster.env"
  return 0
}

down() {
  [ -d "$dir/pids" ] || { echo "no cluster in $dir"; return 0; }
  if pid_alive "$dir/pids/nginx.pid"; then
    kill -TERM "$(cat "$dir/pids/nginx.pid")" 2>/dev/null || true   # fast stop: master and workers
  fi
  for name in api1 api2 worker s3; do
    local f=$dir/pids/$name.pid
    pid_alive "$f" && kill -TERM "$(cat "$f")" 2>/dev/null || true
  done
  for name in api1 api2 worker s3 nginx; do
    local f=$dir/pids/$name.pid
    for _ in $(seq 1 100); do pid_alive "$f" || break; sleep 0.1; done
    pid_alive "$f" && kill -KILL "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  psql "$pg" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -f "$dir/cluster.env" "$dir/secrets.env" "$dir/bin"
  log "cluster in $dir stopped"
}

case "${1:-}" in
  up) up ;;
  restart) restart "${2:-}" "${3:-TERM}" ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status|restart api1|api2|worker [TERM|KILL]" >&2; exit 2 ;;
esac
