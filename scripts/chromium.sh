#!/usr/bin/env bash
# Installs Debian's chromium for the console's browser tests
# (pkg/ops/console, driven headless with chromedp) when /usr/bin/chromium is
# missing. Idempotent: does nothing when it is there. Needs root (or sudo)
# and an apt source; where neither is available it says so and stops, and
# the browser tests then skip outside CI and fail in CI (CI=true).
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium.sh: /usr/bin/chromium is missing and this machine has no apt-get; install chromium yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "chromium.sh: /usr/bin/chromium is missing; run as root: apt-get install -y chromium" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo "chromium.sh: installing Debian's chromium for the browser tests"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version
