#!/usr/bin/env bash
# Starts, in the background, the network-bound work `make test` needs later
# so it overlaps the first compile (go vet), which keeps both cores busy for
# minutes on a fresh machine: the pinned helper modules' downloads, the real
# node's Debian packages and the MPI images' root filesystems; then, at the
# lowest CPU priority, the binaries only the later suites use. Each step is
# one a later target runs again, cached or behind a lock, so a step that
# fails here only loses its head start; its log says why.
#
#   hack/prefetch.sh [PID]  # returns at once; the log is $TESTBIN/prefetch.log;
#                           # the builds stop when PID (default: the caller) ends
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
testbin=${TESTBIN:-$root/.testbin}
mkdir -p "$testbin"
log=$testbin/prefetch.log

modules() {
  TESTBIN_DOWNLOAD_ONLY=1 "$root/hack/testbin/build.sh" cluster trainer node olm controller-gen ||
    echo "prefetch: the helper modules: failed"
  # Then, at the lowest priority, the binaries the later suites need, in
  # the order they need them: the test suites leave a core idle much of
  # the time, and this build takes it. A target that needs one of them
  # waits for it (build.sh locks each binary).
  nice -n 19 "$root/hack/testbin/build.sh" trainer coredns || echo "prefetch: the later binaries: failed"
  # The kubelet shares its lock, and most of its packages, with the
  # control plane's Kubernetes binaries, which make testbin builds in the
  # foreground: started first, at this priority, it held make waiting on
  # the lock for 5.4 minutes of a cold run. After them, it compiles only
  # what is the kubelet's own.
  until "$root/hack/testbin/build.sh" -current kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    kill -0 "$owner" 2>/dev/null || return 0
    sleep 10
  done
  nice -n 19 "$root/hack/testbin/build.sh" kubelet olm || echo "prefetch: the later binaries: failed"
}

node() {
  if (( EUID != 0 )); then
    echo "prefetch: not root: no real node, so no packages or images"
    return
  fi
  "$root/hack/node/install.sh" || echo "prefetch: the node's packages: failed"
  local suite
  for suite in bookworm trixie; do
    "$root/hack/images/mpi/build.sh" "$suite" >/dev/null || echo "prefetch: the $suite image: failed"
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
