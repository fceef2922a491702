#!/usr/bin/env bash
# Regenerates the web UI's screenshots in docs/ui/ from the Chromium tests (real server, real
# uploads, headless Debian Chromium). Needs chromium and chromium-driver (scripts/test.sh
# installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/ui
cargo build -q --bins -p packyard-api
UI_SCREENSHOTS="$PWD/docs/ui" TEST_CHROMEDRIVER="${TEST_CHROMEDRIVER:-/usr/bin/chromedriver}" \
  cargo nextest run -p packyard-api --test it --no-fail-fast -E 'test(/^ui::/)'
ls -l docs/ui
