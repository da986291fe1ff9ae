#!/usr/bin/env bash
# Installs the browser the dashboard's tests drive: Chromium from the
# machine's Debian sources, headless, with the fonts its pages need.
# Nothing is done when it is there already.
#
#   test/browser/install.sh   # root; prints the browser's path
set -euo pipefail
packages=(chromium fonts-liberation)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
done
if (( ${#missing[@]} )); then
  if (( EUID != 0 )); then
    echo "browser: ${missing[*]} missing, and installing needs root" >&2
    exit 1
  fi
  # Another apt (the machine's daily update) may hold the locks: wait for
  # them rather than fail.
  apt=(apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v chromium
