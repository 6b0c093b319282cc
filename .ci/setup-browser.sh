#!/usr/bin/env bash
# Debian's Chromium for tests/behaviour/test_browser.py (driven by the `playwright` package; never `playwright install`).
# Idempotent: does nothing when /usr/bin/chromium is already there. `make test` runs it first.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "setup-browser: $(/usr/bin/chromium --version 2>/dev/null | head -n1)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
echo "setup-browser: $(/usr/bin/chromium --version 2>/dev/null | head -n1)"
