#!/usr/bin/env bash
# ensure-chromium.sh
#
# Makes sure headless Chromium (Debian `chromium`) is installed for the
# status page's browser tests (e2e/ui_test.go drives it with chromedp).
# Idempotent: does nothing when `chromium` is on the PATH. Installing
# needs root (apt-get); otherwise it fails saying what to install, since
# the tests fail without it rather than skip.
set -euo pipefail

log() { printf 'ensure-chromium: %s\n' "$*" >&2; }

if command -v chromium >/dev/null; then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	log "error: chromium is missing and this is not root: run apt-get install chromium"
	exit 1
fi
log "installing chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
# The package's services do not start without an init system; the
# install succeeds regardless.
apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium >&2
command -v chromium >/dev/null || { log "error: chromium is still not on the PATH"; exit 1; }
