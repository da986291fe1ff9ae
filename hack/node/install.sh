#!/usr/bin/env bash
# Installs what the local cluster's real node runs, from Debian's packages,
# at pinned versions: containerd, runc and the CNI plugins. The kubelet is
# built from pinned modules (hack/testbin/build.sh node). Root only; a
# no-op when the pinned versions are installed already.
set -euo pipefail

packages=(
  containerd=1.6.20~ds1-1+deb12u3
  runc=1.1.5+ds1-1+deb12u1
  containernetworking-plugins=1.1.1+ds1-3+b5
)

missing=()
for p in "${packages[@]}"; do
  name=${p%%=*} version=${p#*=}
  if [[ "$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null || true)" != "$version" ]]; then
    missing+=("$p")
  fi
done
if (( ${#missing[@]} == 0 )); then
  echo "node: containerd, runc and CNI plugins up to date"
  exit 0
fi
if (( EUID != 0 )); then
  # The real node needs root anyway; its tests skip without it.
  echo "node: not root, so not installing ${missing[*]}; the real node cannot run" >&2
  exit 0
fi
echo "node: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: no service is started (containerd runs only as
# the local cluster's, with its own paths).
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
