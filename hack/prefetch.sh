#!/usr/bin/env bash
# Starts, in the background, the network-bound work `make test` needs later
# so it overlaps the first compile (go vet), which keeps both cores busy for
# minutes on a fresh machine: the pinned helper modules' downloads, the real
# node's, the wire test's and the browser's Debian packages, the MPI images'
# root filesystems and the dashboard's npm packages; then, at the lowest CPU priority, every binary make test
# builds, in the order it needs them. Each step is one a later target runs
# again, cached or behind a lock, so a step that fails here only loses its
# head start; its log says why.
#
#   hack/prefetch.sh [PID]  # returns at once; the log is $TESTBIN/prefetch.log;
#                           # the builds stop when PID (default: the caller) ends
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
testbin=${TESTBIN:-$root/.testbin}
mkdir -p "$testbin"
log=$testbin/prefetch.log

modules() {
  # The downloads run beside the builds below: a build fetches what it
  # lacks itself, and Go's module cache lets two go commands share it.
  {
    TESTBIN_DOWNLOAD_ONLY=1 "$root/hack/testbin/build.sh" staticcheck controller-gen cluster trainer node openshift olm ||
      echo "prefetch: the helper modules: failed"
  } &
  # Meanwhile, at the lowest priority, the binaries make test needs, in the
  # order it needs them: make generate's controller-gen, make testbin's
  # control plane, then the suites'. This lane works in the time go vet
  # leaves a core idle, and a target that needs a binary it is building
  # waits for it (build.sh locks each binary, and Kubernetes's as one
  # group) rather than compiling the same packages again. The kubelet
  # comes after the control plane, whose packages it mostly shares: built
  # first, it held make testbin on the group's lock while it compiled the
  # packages only the kubelet uses.
  local group
  for group in controller-gen cluster trainer node openshift olm; do
    nice -n 19 "$root/hack/testbin/build.sh" "$group" || echo "prefetch: the $group binaries: failed"
  done
  wait
}

# wire_packages installs the Debian packages the wire test runs
# (test/wire/packages.txt), which it would otherwise install itself when
# it starts, half an hour into a cold make test.
wire_packages() {
  local p missing=()
  while read -r p; do
    [[ -z $p || $p == '#'* ]] && continue
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
  done <"$root/test/wire/packages.txt"
  (( ${#missing[@]} )) || return 0
  echo "prefetch: installing the wire test's ${missing[*]}"
  local apt=(apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

node() {
  if (( EUID != 0 )); then
    echo "prefetch: not root: no real node, so no packages or images"
    return
  fi
  "$root/hack/node/install.sh" || echo "prefetch: the node's packages: failed"
  wire_packages || echo "prefetch: the wire test's packages: failed"
  "$root/test/browser/install.sh" >/dev/null || echo "prefetch: the dashboard tests' browser: failed"
  local suite
  for suite in bookworm trixie; do
    "$root/test/localcluster/images/mpi/build.sh" "$suite" >/dev/null || echo "prefetch: the $suite image: failed"
  done
}

# owner is the process whose end ends the builds: make, which passes its
# PID, so that a make test that fails early leaves nothing building.
owner=${1:-$PPID}

# Two lanes: the module proxy and Debian's mirror are different servers.
# Each lane is a process group of its own (set -m), so the builds' lane
# ends with its go commands. The node's lane is left to finish rather
# than cut in the middle of dpkg. stdin, stdout and stderr leave make's:
# CI's log pipe must not wait on them.
(
  set -m
  modules &
  builds=$!
  node &
  # The dashboard's packages, from the npm registry (a third server).
  make -C "$root" --no-print-directory web >/dev/null || echo "prefetch: the dashboard's page: failed" &
  while kill -0 "$builds" 2>/dev/null; do
    if ! kill -0 "$owner" 2>/dev/null; then
      echo "prefetch: make ended; stopping the builds"
      kill -- -"$builds" 2>/dev/null
      break
    fi
    sleep 5
  done
  wait
  echo "prefetch: done"
) </dev/null >"$log" 2>&1 &
echo "prefetch: started in the background (pid $!), log in $log"
