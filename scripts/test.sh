#!/usr/bin/env bash
# The one test command: installs what the tests need and is missing, starts the services that
# are stopped, exports their URLs, and runs the whole suite. Fast when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# --- packages -------------------------------------------------------------------------------
need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "$2" ]; }
have pg_ctlcluster /usr/bin/pg_ctlcluster || need+=(postgresql)
have psql /usr/bin/psql || need+=(postgresql-client)
have mariadbd /usr/sbin/mariadbd || need+=(mariadb-server)
have mysql /usr/bin/mysql || need+=(mariadb-client)
have redis-server /usr/bin/redis-server || need+=(redis-server)
have redis-cli /usr/bin/redis-cli || need+=(redis-tools)
have rabbitmq-server /usr/sbin/rabbitmq-server || need+=(rabbitmq-server)
have go /usr/bin/go || need+=(golang-go)
# Go's vulnerability checker, reading a Go repository's vulnerability database (it/vulnerabilities.rs).
have govulncheck /usr/bin/govulncheck || need+=(govulncheck)
# x/mod's checksum database server, built offline by the Go tests (api/tests/fixtures/sumdb).
[ -d /usr/share/gocode/src/golang.org/x/mod/sumdb ] || need+=(golang-golang-x-mod-dev)
have gpg /usr/bin/gpg || need+=(gnupg)
have openssl /usr/bin/openssl || need+=(openssl)
# HTTPS checks (api/tests/it/tls.rs): HTTP/2 by ALPN, redirects.
have curl /usr/bin/curl || need+=(curl)
# The web UI's APK set-up snippet fetches the key with wget (api/tests/it/ui.rs).
have wget /usr/bin/wget || need+=(wget)
# A real outbound HTTP proxy for the corporate-network tests (api/tests/it/upstreams.rs).
have tinyproxy /usr/bin/tinyproxy || need+=(tinyproxy)
# A real OpenLDAP directory for the LDAP sign-in tests (api/tests/it/ldap.rs, scripts/ldap/).
have slapd /usr/sbin/slapd || need+=(slapd)
have ldapmodify /usr/bin/ldapmodify || need+=(ldap-utils)
# Node.js and npm run the OpenID provider of the OIDC sign-in tests (api/tests/fixtures/oidc).
have node /usr/bin/node || need+=(nodejs)
have npm /usr/bin/npm || need+=(npm)
have python3 /usr/bin/python3 || need+=(python3 python3-venv)
have nginx /usr/sbin/nginx || need+=(nginx-light)
have chromium /usr/bin/chromium || need+=(chromium)
have chromedriver /usr/bin/chromedriver || need+=(chromium-driver)
# Real APT publishers to import from (api/tests/it/import.rs).
have aptly /usr/bin/aptly || need+=(aptly)
have reprepro /usr/bin/reprepro || need+=(reprepro)
# dpkg-source, which apt-get source runs to unpack a source package.
have dpkg-source /usr/bin/dpkg-source || need+=(dpkg-dev)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # Services must not be started by the package scripts in a container; we start them below.
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  log "installing cargo-nextest"
  cargo install --locked cargo-nextest
fi

# Python test clients (e.g. conan) live in a virtualenv under target/, reinstalled only when
# scripts/test-requirements.txt changes.
if grep -qv '^\s*\(#\|$\)' scripts/test-requirements.txt 2>/dev/null; then
  venv=target/test-venv
  stamp="$venv/.requirements.sha256"
  want=$(sha256sum scripts/test-requirements.txt | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing Python test clients into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r scripts/test-requirements.txt
    echo "$want" > "$stamp"
  fi
  export PATH="$PWD/$venv/bin:$PATH" TEST_TOOLS_VENV="$PWD/$venv"
fi
# A real Conan remote to import from (api/tests/it/import.rs): conan_server, in a virtualenv of
# its own (its package carries its own copy of the client's modules).
server_venv=target/conan-server-venv
if [ ! -x "$server_venv/bin/conan_server" ]; then
  log "installing conan_server into $server_venv"
  python3 -m venv "$server_venv"
  "$server_venv/bin/pip" install -q conan-server==2.33.0
fi
export CONAN_SERVER="$PWD/$server_venv/bin/conan_server"

# --- services -------------------------------------------------------------------------------
wait_for() { # name, command...
  local name=$1; shift
  for _ in $(seq 1 120); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "$name did not come up"; return 1
}

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  log "starting PostgreSQL"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start || true
  wait_for PostgreSQL pg_isready -q -h 127.0.0.1 -p 5432
fi
PG_URL="postgres://postgres:postgres@127.0.0.1:5432/postgres"
if ! psql "$PG_URL" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  # A fresh install wants a password over TCP: give the postgres role one (peer auth on the socket).
  log "setting a password for the PostgreSQL role postgres"
  (cd / && $SUDO su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\"") >/dev/null
  psql "$PG_URL" -qAtc 'SELECT 1' >/dev/null
fi

if ! mysqladmin -h 127.0.0.1 -uroot --connect-timeout=2 ping >/dev/null 2>&1 \
   && ! mysqladmin -h 127.0.0.1 -upackyard -ppackyard --connect-timeout=2 ping >/dev/null 2>&1; then
  log "starting MariaDB"
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_for MariaDB mysqladmin --socket=/run/mysqld/mysqld.sock ping
fi
if mysql -h 127.0.0.1 -uroot -e 'SELECT 1' >/dev/null 2>&1; then
  MY_URL="mysql://root@127.0.0.1:3306/mysql"
else
  # root authenticates by socket on a fresh install: make a test user that can create databases.
  if ! mysql -h 127.0.0.1 -upackyard -ppackyard -e 'SELECT 1' >/dev/null 2>&1; then
    log "creating the MariaDB user packyard"
    $SUDO mysql -uroot -e "CREATE USER IF NOT EXISTS 'packyard'@'127.0.0.1' IDENTIFIED BY 'packyard';
      CREATE USER IF NOT EXISTS 'packyard'@'localhost' IDENTIFIED BY 'packyard';
      GRANT ALL PRIVILEGES ON *.* TO 'packyard'@'127.0.0.1'; GRANT ALL PRIVILEGES ON *.* TO 'packyard'@'localhost';"
  fi
  MY_URL="mysql://packyard:packyard@127.0.0.1:3306/mysql"
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  log "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  wait_for Redis redis-cli -h 127.0.0.1 -p 6379 ping
fi

amqp_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
if ! amqp_up; then
  log "starting RabbitMQ"
  $SUDO rabbitmq-server -detached >/dev/null 2>&1 || true
  wait_for RabbitMQ amqp_up
fi

# The S3-compatible test server (moto) for the S3 blob store suite; stopped when the run ends.
S3_PORT=${TEST_S3_PORT:-9555}
s3_up() { (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null; }
if ! s3_up; then
  log "starting the S3 test server (moto) on 127.0.0.1:$S3_PORT"
  mkdir -p target
  moto_server -H 127.0.0.1 -p "$S3_PORT" >target/moto.log 2>&1 &
  moto_pid=$!
  trap 'kill "$moto_pid" 2>/dev/null || true' EXIT
  wait_for "the S3 test server" s3_up
fi
export TEST_S3_URL="http://127.0.0.1:$S3_PORT"

# Real Debian packages for the .deb parser tests, downloaded once into target/test-debs.
debs=target/test-debs
want_debs=(hello jq libjq1 sl)
missing_debs=()
for p in "${want_debs[@]}"; do ls "$debs/${p}_"*.deb >/dev/null 2>&1 || missing_debs+=("$p"); done
if [ ${#missing_debs[@]} -gt 0 ]; then
  mkdir -p "$debs"
  log "downloading real .deb files for the tests: ${missing_debs[*]}"
  (cd "$debs" && apt-get download -qq "${missing_debs[@]}" >/dev/null 2>&1) \
    || { $SUDO apt-get update -qq && (cd "$debs" && apt-get download -qq "${missing_debs[@]}" >/dev/null); }
fi
export TEST_DEBS_DIR="$PWD/$debs"

# A real Debian source package (its .dsc and the files it lists) for the source upload tests,
# fetched once into target/test-srcs with apt-get source from the machine's own Debian mirror
# (a scratch configuration with a deb-src line; nothing of the system's apt state is touched).
srcs=target/test-srcs
if ! ls "$srcs"/hello_*.dsc >/dev/null 2>&1; then
  log "downloading a real source package for the tests: hello"
  scratch=$(mktemp -d)
  mkdir -p "$scratch/lists/partial" "$scratch/cache/archives/partial" "$srcs"
  uri=$(grep -hm1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}')
  suite=$(grep -hm1 '^Suites:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}')
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${uri:-http://deb.debian.org/debian} ${suite:-bookworm} main" > "$scratch/sources.list"
  aptsrc() { apt-get -qq -o Dir::Etc::SourceList="$scratch/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$scratch/lists" -o Dir::Cache="$scratch/cache" -o Debug::NoLocking=1 \
    -o APT::Sandbox::User=root "$@"; }
  aptsrc update >/dev/null
  (cd "$srcs" && aptsrc source --download-only hello >/dev/null 2>&1)
  rm -rf "$scratch"
fi
export TEST_SRCS_DIR="$PWD/$srcs"

# A real OpenID provider for the OIDC sign-in tests: npm's oidc-provider (OpenID Certified),
# installed once into target/oidc-provider; the tests run api/tests/fixtures/oidc/server.mjs
# from there.
oidc=target/oidc-provider
if [ ! -f "$oidc/node_modules/oidc-provider/package.json" ]; then
  log "installing the OpenID provider for the tests (npm oidc-provider)"
  mkdir -p "$oidc"
  (cd "$oidc" && npm install --no-audit --no-fund --silent oidc-provider@9.13.3 >/dev/null)
fi
export TEST_OIDC_DIR="$PWD/$oidc"

export TEST_POSTGRES_URL="$PG_URL"
export TEST_MYSQL_URL="$MY_URL"
export TEST_REDIS_URL="redis://127.0.0.1:6379/"
export TEST_AMQP_URL="amqp://guest:guest@127.0.0.1:5672/%2f"
export TEST_CHROMEDRIVER=/usr/bin/chromedriver TEST_CHROMIUM=/usr/bin/chromium

# Databases left behind by earlier runs (a failed test does not drop its own).
psql "$PG_URL" -qAtc "SELECT datname FROM pg_database WHERE datname LIKE 'packyard_t_%'" \
  | while read -r db; do psql "$PG_URL" -qc "DROP DATABASE IF EXISTS $db" >/dev/null || true; done
mysql_cli() { if [ "$MY_URL" = "mysql://root@127.0.0.1:3306/mysql" ]; then mysql -h 127.0.0.1 -uroot "$@"; else mysql -h 127.0.0.1 -upackyard -ppackyard "$@"; fi; }
mysql_cli -N -e "SHOW DATABASES LIKE 'packyard\\_t\\_%'" \
  | while read -r db; do mysql_cli -e "DROP DATABASE IF EXISTS \`$db\`" || true; done

# --- the suite ------------------------------------------------------------------------------
log "running the test suite"
# The benches compile in the test profile too, so that one that rots fails here rather than
# when someone next measures. Doc tests next, so that nextest's summary is the closing line.
cargo build --workspace --benches --quiet
cargo test --workspace --doc --quiet
cargo nextest run --workspace --no-fail-fast "$@"
