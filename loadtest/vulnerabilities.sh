#!/usr/bin/env bash
# Vulnerability matching at scale (issue #41's acceptance), on PostgreSQL at the default
# configuration: 100,000 catalogued components (loadtest/osv-fixture.py) and an OSV set sized to
# the real data of the four ecosystems (its record counts are in the generator's header).
# Measures, with /usr/bin/time, the wall time and peak RSS of
#   1. `packyard-api vulnerabilities import osv.json` (every record checked, stored, each
#      affected component announced),
#   2. `packyard-api vulnerabilities census` (every component matched against every advisory:
#      what `packyard_components_with_advisories` shows),
#   3. the import again with 100 new advisories (the rest unchanged: only what changed is
#      stored and matched).
# Environment: PG (postgres://postgres@127.0.0.1:5432).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
name=vulnerabilities
# shellcheck source=loadtest/common.sh
source loadtest/common.sh
PG=${PG:-postgres://postgres@127.0.0.1:5432}
db=packyard_vulnbench_$$
psql "$PG/postgres" -qc "CREATE DATABASE $db" >/dev/null
drop_db() { cleanup; psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true; }
trap drop_db EXIT
export PACKYARD_DATABASE__URL="$PG/$db" PACKYARD_SECURITY__SECRET=vulnerability-bench-secret-0123456789
export PACKYARD_SECURITY__ADMIN_PASSWORD=bench-admin
port=$(free_port); mport=$(free_port)
(cd "$work" && exec env PACKYARD_SERVER__BIND=127.0.0.1:$port PACKYARD_SERVER__MANAGEMENT_BIND=127.0.0.1:$mport \
  "$api" >"$work/server.log" 2>&1) &
pid=$!
wait_http "http://127.0.0.1:$mport/readyz"
base=http://127.0.0.1:$port
for spec in '{"name":"go","format":"go","type":"hosted"}' \
  '{"name":"apt","format":"apt","type":"hosted","apt":{"distribution":"bookworm","architectures":["amd64"]}}' \
  '{"name":"apk","format":"apk","type":"hosted"}' '{"name":"conan","format":"conan","type":"hosted"}'; do
  curl -fsS -u admin:bench-admin -H 'content-type: application/json' "$base/api/v1/repositories" -d "$spec" >/dev/null
done
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
ids=$(psql "$PG/$db" -Atc "SELECT name || '=' || id FROM repositories ORDER BY name" | tr '\n' ' ')
generated=$(python3 loadtest/osv-fixture.py "$work" $ids)
log "generated: $generated"
psql "$PG/$db" -qc "\\copy components (repository_id, format, component_key, namespace, name, version, created_at, uploaded_by) FROM '$work/components.csv' CSV"
measure() { # label args… -> a table row
  local label=$1; shift
  (cd "$work" && /usr/bin/time -f '%e %M' -o "$work/time" "$api" "$@" >"$work/out" 2>"$work/err") ||
    { cat "$work/err" >&2; return 1; }
  read -r secs kib <"$work/time"
  printf '| %s | %s s | %s MiB | %s |\n' "$label" "$secs" "$((kib / 1024))" "$(tr '\n' ' ' <"$work/out")"
}
echo "| step | wall time | peak RSS | output |"
echo "|---|---|---|---|"
measure "import (62,200 records)" vulnerabilities import "$work/osv.json"
measure "census (100,000 components)" vulnerabilities census
measure "refresh (100 new advisories)" vulnerabilities import "$work/osv-new.json"
