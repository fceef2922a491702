# Sourced by the scripts that compare with nginx (baseline.sh, paired.sh): ensure_nginx (needs
# log; sets $NGINX) and start_nginx, the static-file ceiling they measure against (needs $work,
# $n_port, $www, $NGINX and wait_http).
# Installs nginx where it is missing (Debian's nginx-light) and sets $NGINX.
ensure_nginx() {
  if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    log "installing nginx-light"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
  fi
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  [ -x "$NGINX" ] || { echo "nginx is missing and could not be installed" >&2; exit 1; }
}

# nginx serving $www (the bytes fetched from Packyard) with sendfile, keep-alive,
# open_file_cache and no access log; waits until $1 answers.
start_nginx() {
  cat >"$work/nginx.conf" <<EOF
  worker_processes auto;
  pid $work/nginx.pid;
  error_log $work/nginx-error.log warn;
  events { worker_connections 4096; }
  http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    types { application/octet-stream deb apk; application/gzip gz; }
    default_type text/plain;
    client_body_temp_path $work/nginx-tmp;
    server {
      listen 127.0.0.1:$n_port;
      root $www;
    }
  }
EOF
  mkdir -p "$work/nginx-tmp"
  "$NGINX" -c "$work/nginx.conf" -g 'daemon on;' || { cat "$work/nginx-error.log" >&2; exit 1; }
  wait_http "http://127.0.0.1:$n_port/$1" || { cat "$work/nginx-error.log" >&2; exit 1; }
}
