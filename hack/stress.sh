#!/usr/bin/env bash
# Runs make targets again and again on a machine kept busy, as CI's may be:
# a CPU burner, a parallel go build of the standard library from an empty
# cache and a disk writer that syncs, all at the tests' own priority, so
# together they occupy both cores and the disk etcd syncs to. A test that
# waits for less than its next step uses fails here, not at random in CI.
#
#   hack/stress.sh [-cold] [-runs N] TARGET...   # each TARGET N times in a row (default 5),
#                                                # stopping at the first failure
#
# -cold runs each time in a fresh clone of the checkout's HEAD with empty
# Go, npm and tool caches of its own, as a new machine has them: the clone
# downloads and builds everything it needs, from the module proxy and the
# registries, as CI's first run does.
#
# Each run's target, number, result and seconds go to stdout and to
# $STRESS_LOG (default .testbin/stress.log); a failed run's output stays in
# .testbin/stress-<target>-<run>.out. The load stops with the script: each
# load is a process group of its own, killed by its PID.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=5
cold=
while [[ ${1:-} == -* ]]; do
  case $1 in
    -runs) runs=${2:-}; shift 2 ;;
    -cold) cold=1; shift ;;
    *) echo "stress: unknown option $1" >&2; exit 2 ;;
  esac
done
(( $# )) || { echo "usage: hack/stress.sh [-cold] [-runs N] TARGET..." >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "stress: -runs wants a positive count, got '$runs'" >&2; exit 2; }

mkdir -p "$root/.testbin"
log=${STRESS_LOG:-$root/.testbin/stress.log}
scratch=$(mktemp -d /tmp/torus-stress.XXXXXX)
loads=()

stop_load() {
  local pid
  for pid in "${loads[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${loads[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  # The Go module cache is read-only, as the go command leaves it.
  chmod -R u+w "$scratch" 2>/dev/null || true
  rm -rf "$scratch"
}
trap stop_load EXIT

# start runs a load as a process group of its own, so stop_load ends it and
# every child it started (the go command's compilers, dd) by one PID.
start() {
  setsid bash -c "$1" &
  loads+=("$!")
}

# One core's worth of pure CPU.
start 'while :; do :; done'
# A parallel build of the standard library with a cache of its own, emptied
# each round so every round compiles: both cores, and memory and disk churn.
start "export GOCACHE=$scratch/gocache GOFLAGS=; while :; do rm -rf \"\$GOCACHE\"; go build -p 2 std >/dev/null 2>&1 || sleep 1; done"
# Writes that must reach the disk, on the file system the tests' etcd uses.
start "while :; do dd if=/dev/zero of=$scratch/io bs=1M count=256 conv=fsync status=none; rm -f $scratch/io; done"

echo "stress: load started (CPU burner, go build -p 2 std, dd with fsync): PIDs ${loads[*]}" | tee -a "$log"
for target in "$@"; do
  for (( i = 1; i <= runs; i++ )); do
    out=$root/.testbin/stress-$target-$i.out
    dir=$root
    env=()
    if [[ -n $cold ]]; then
      dir=$scratch/clone-$target-$i
      caches=$scratch/caches-$target-$i
      git clone -q "$root" "$dir"
      mkdir -p "$caches"
      # make test-stress exports the checkout's own TESTBIN (and make its
      # MAKEFLAGS): the clone must build its tools into its own .testbin,
      # and start as a make of its own, as CI's does.
      env=(-u TESTBIN -u MAKEFLAGS -u MAKELEVEL -u MFLAGS GOCACHE="$caches/go-build" GOMODCACHE="$caches/go-mod" XDG_CACHE_HOME="$caches/xdg")
      echo "stress: $target run $i/$runs in a fresh clone of $(git -C "$root" rev-parse --short HEAD) with empty caches: $dir" | tee -a "$log"
    fi
    start_s=$SECONDS
    if env "${env[@]}" make -C "$dir" --no-print-directory "$target" >"$out" 2>&1; then
      echo "stress: $target run $i/$runs passed in $(( SECONDS - start_s )) s" | tee -a "$log"
      rm -f "$out"
    else
      rc=$?
      echo "stress: $target run $i/$runs FAILED (exit $rc) in $(( SECONDS - start_s )) s; output: $out" | tee -a "$log"
      tail -n 60 "$out"
      exit "$rc"
    fi
  done
done
echo "stress: every run passed: $* x $runs" | tee -a "$log"
