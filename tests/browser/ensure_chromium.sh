#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test, once; does nothing when it is there.
# Playwright drives this binary (never `playwright install`, which would download a browser build).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
echo "ensure_chromium: installing Debian's chromium for the browser test" >&2
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
test -x /usr/bin/chromium
