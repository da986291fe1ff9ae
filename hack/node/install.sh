#!/usr/bin/env bash
# Installs what the local cluster's real nodes run, from Debian's packages,
# at least the versions measured: runc and the CNI plugins, and iptables and
# ipset for the network policy agent (kube-router). The kubelet and
# containerd are built from pinned modules (hack/testbin/build.sh node).
# Root only; a no-op when the pinned versions are installed already.
set -euo pipefail

# Minimum versions, as measured: Debian keeps only a suite's newest point
# release, so an exact pin would break at its next security update.
packages=(
  runc=1.1.5+ds1-1+deb12u1
  containernetworking-plugins=1.1.1+ds1-3+b5
  iptables=1.8.9-2
  ipset=7.17-1
)

# One install at a time (make test's prefetch and node-deps may overlap):
# the second sees what the first installed.
if (( EUID == 0 )); then
  exec 9>/run/lock/torus-node-install.lock
  flock 9
fi

# installed is a package's version when it is installed: a package
# removed but not purged ("rc") keeps its version in dpkg's database, and
# dpkg-query fails on one it has never seen (a fresh machine), which is
# not installed either, not an error.
installed() { # name
  { dpkg-query -W -f='${db:Status-Abbrev}${Version}' "$1" 2>/dev/null || true; } | sed -n 's/^ii *//p'
}

missing=()
for p in "${packages[@]}"; do
  name=${p%%=*} min=${p#*=}
  have=$(installed "$name")
  if [[ -z $have ]] || ! dpkg --compare-versions "$have" ge "$min"; then
    missing+=("$name")
  fi
done
if (( ${#missing[@]} == 0 )); then
  echo "node: runc, CNI plugins, iptables and ipset up to date"
  exit 0
fi
if (( EUID != 0 )); then
  # The real node needs root anyway; its tests skip without it.
  echo "node: not root, so not installing ${missing[*]}; the real node cannot run" >&2
  exit 0
fi
echo "node: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Another apt (the machine's daily update) may hold the locks: wait for
# them; a mirror's dropped connection is tried again.
apt=(apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
"${apt[@]}" update -qq
"${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for p in "${packages[@]}"; do
  name=${p%%=*} min=${p#*=}
  if ! dpkg --compare-versions "$(installed "$name")" ge "$min"; then
    echo "node: $name is older than $min" >&2
    exit 1
  fi
done
