#!/usr/bin/env bash
# Builds the test control-plane binaries from pinned Go modules into $TESTBIN/bin.
# Each binary is rebuilt only when its pinned version or helper module
# changes: a stamp file $TESTBIN/stamps/<name> records both.
#
#   hack/testbin/build.sh etcd kube-apiserver ...
#   hack/testbin/build.sh envtest      # etcd and kube-apiserver
#   hack/testbin/build.sh cluster      # everything the local cluster runs
#   hack/testbin/build.sh trainer      # upstream Trainer controller, for test/perf/controlplane
#   hack/testbin/build.sh mpi-operator # Kubeflow's mpi-operator, for make bench-mpi-operator
#   hack/testbin/build.sh olm          # OLM, opm and a loopback catalog server (test/olm)
#   hack/testbin/build.sh openshift    # OpenShift's SCC admission as a webhook (test/localcluster -openshift)
#   hack/testbin/build.sh node         # kubelet, containerd, CoreDNS, kube-router, Multus and Whereabouts, for the real nodes beside the kwok nodes
#
# With TESTBIN_DOWNLOAD_ONLY set, it only downloads the modules the builds
# need (hack/prefetch.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The helper modules are outside the repository's workspace (go.work).
export GOWORK=off
# OpenShift's modules at the versions hack/testbin/openshift pins are not
# in the Go checksum database; their go.sum there is what is checked.
export GONOSUMDB=github.com/openshift
root=$(cd "$here/../.." && pwd)
testbin=${TESTBIN:-$root/.testbin}
mkdir -p "$testbin/bin" "$testbin/stamps"

modversion() { # dir module
  (cd "$here/$1" && go list -m -f '{{.Version}}' "$2")
}

# current says whether a binary was built at this stamp: its pinned
# version and the helper module (which decides the versions of the
# libraries linked in).
current() { # name stamp
  [[ -x "$testbin/bin/$1" && -f "$testbin/stamps/$1" && "$(cat "$testbin/stamps/$1")" == "$2" ]]
}

# lock waits until no other build.sh builds the same binary (make test
# starts some builds early, at low priority; a target that needs one
# waits for it); unlock lets the next one look. A build waited for gets
# the waiter's priority (boost).
lock() { # name
  exec {lockfd}>"$testbin/stamps/.$1.lock"
  if ! flock -n "$lockfd"; then
    boost "$testbin/stamps/.$1.holder"
    flock "$lockfd"
  fi
  echo "$$" >"$testbin/stamps/.$1.holder"
}

# boost gives the build.sh that holds a lock, and every process under it,
# the priority of the one that waits for it: prefetch starts builds at the
# lowest priority, and on a machine kept busy by other work such a build
# would hold make test's own targets for as long as that work lasts.
boost() { # holder file
  local holder ours i=0
  holder=$(cat "$1" 2>/dev/null) || return 0
  [[ $holder =~ ^[0-9]+$ ]] && grep -qs build.sh "/proc/$holder/cmdline" || return 0
  ours=$(ps -o ni= -p "$$" | tr -d ' ')
  local pids=("$holder")
  while (( i < ${#pids[@]} )); do
    mapfile -t -O "${#pids[@]}" pids < <(pgrep -P "${pids[i]}" || true)
    i=$((i + 1))
  done
  # Every thread: a niceness is a thread's, and a go command's threads
  # each start compilers at their own. A compiler may exit between
  # pgrep and here: a glob skips it where a failing command would
  # stop this script under set -e.
  local tids=() p t
  for p in "${pids[@]}"; do
    for t in "/proc/$p/task/"*; do
      if [[ -e $t ]]; then tids+=("${t##*/}"); fi
    done
  done
  renice -n "$ours" -p "${tids[@]}" >/dev/null 2>&1 || true
  echo "testbin: waiting for the build of $(basename "$1" .holder | tr -d .) that PID $holder runs, at this build's priority ($ours)" >&2
}
unlock() {
  exec {lockfd}>&-
}

build() { # name helper-dir package version [ldflags] [build tags]
  if [[ -n ${TESTBIN_DOWNLOAD_ONLY:-} ]]; then
    build_locked "$@"
    return
  fi
  lock "$1"
  build_locked "$@"
  unlock
}

build_locked() {
  local name=$1 dir=$2 pkg=$3 version=$4 ldflags=${5:-} tags=${6:-}
  local stamp="$testbin/stamps/$name"
  version="$version ($dir)"
  if current "$name" "$version"; then
    echo "testbin: $name $version up to date"
    return
  fi
  if [[ -n ${TESTBIN_DOWNLOAD_ONLY:-} ]]; then
    # What the build would download, and nothing more (go mod download
    # would fetch every module the helper's go.mod lists).
    (cd "$here/$dir" && CGO_ENABLED=0 go list -e -deps -tags "$tags" "$pkg" >/dev/null)
    echo "testbin: downloaded what $name needs"
    return
  fi
  echo "testbin: building $name $version"
  local start=$SECONDS
  (cd "$here/$dir" && CGO_ENABLED=0 go build -tags "$tags" -ldflags "-s -w $ldflags" -o "$testbin/bin/$name" "$pkg")
  echo "$version" > "$stamp"
  echo "testbin: built $name in $((SECONDS - start))s"
}

kube_ldflags() { # version
  local v=$1 minor
  minor=$(echo "$v" | cut -d. -f2)
  local p=k8s.io/component-base/version
  local c=k8s.io/client-go/pkg/version
  echo "-X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean" \
       "-X $c.gitVersion=$v -X $c.gitMajor=1 -X $c.gitMinor=$minor -X $c.gitTreeState=clean"
}

expand() { # groups of components
  for c in "$@"; do
    case "$c" in
      envtest) echo etcd kube-apiserver ;;
      cluster) echo etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok jobset kueue metrics-server ;;
      # Not part of "cluster": OLM's module graph is large (about 3 minutes
      # cold) and only test/olm needs it.
      olm) echo olm-operator catalog-operator opm catalog-server ;;
      openshift) echo openshift-scc ;;
      node) echo kubelet containerd containerd-shim-runc-v2 ctr coredns kube-router multus whereabouts ;;
      *) echo "$c" ;;
    esac
  done
}

# Kubernetes's binaries share most of their packages: one go build makes
# those out of date together, so that one's link overlaps another's
# compile rather than following it.
build_kube() { # components
  if [[ -n ${TESTBIN_DOWNLOAD_ONLY:-} ]]; then
    build_kube_locked "$@"
    return
  fi
  lock kube
  build_kube_locked "$@"
  unlock
}

build_kube_locked() {
  local v stamp c start
  v=$(modversion kube k8s.io/kubernetes)
  stamp="$v (kube)"
  local stale=() pkgs=()
  for c in "$@"; do
    if current "$c" "$stamp"; then
      echo "testbin: $c $stamp up to date"
    else
      stale+=("$c")
      pkgs+=("k8s.io/kubernetes/cmd/$c")
    fi
  done
  (( ${#stale[@]} )) || return 0
  if [[ -n ${TESTBIN_DOWNLOAD_ONLY:-} ]]; then
    (cd "$here/kube" && CGO_ENABLED=0 go list -e -deps "${pkgs[@]}" >/dev/null)
    echo "testbin: downloaded what ${stale[*]} need"
    return
  fi
  echo "testbin: building ${stale[*]} $stamp"
  start=$SECONDS
  (cd "$here/kube" && CGO_ENABLED=0 go build -ldflags "-s -w $(kube_ldflags "$v")" -o "$testbin/bin/" "${pkgs[@]}")
  for c in "${stale[@]}"; do
    echo "$stamp" > "$testbin/stamps/$c"
  done
  echo "testbin: built ${stale[*]} in $((SECONDS - start))s"
}

components=$(expand "$@")
kubes=()
for component in $components; do
  case "$component" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet) kubes+=("$component") ;;
  esac
done
(( ${#kubes[@]} == 0 )) || build_kube "${kubes[@]}"

for component in $components; do
  case "$component" in
    etcd)
      build etcd etcd go.etcd.io/etcd/server/v3 "$(modversion etcd go.etcd.io/etcd/server/v3)" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet) ;; # above
    # One helper module for the controllers: their shared libraries compile once.
    kwok)
      build kwok controllers sigs.k8s.io/kwok/cmd/kwok "$(modversion controllers sigs.k8s.io/kwok)" ;;
    jobset)
      build jobset-controller controllers sigs.k8s.io/jobset "$(modversion controllers sigs.k8s.io/jobset)" ;;
    kueue)
      build kueue controllers sigs.k8s.io/kueue/cmd/kueue "$(modversion controllers sigs.k8s.io/kueue)" ;;
    trainer)
      # Upstream's Trainer controller, for the side-by-side measures and the drop-in suite.
      build trainer-controller-manager controllers github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager \
        "$(modversion controllers github.com/kubeflow/trainer/v2)" ;;
    mpi-operator)
      # Kubeflow's mpi-operator, for the side-by-side measures (make bench-mpi-operator).
      build mpi-operator mpioperator github.com/kubeflow/mpi-operator/cmd/mpi-operator \
        "$(modversion mpioperator github.com/kubeflow/mpi-operator)" ;;
    metrics-server)
      # The metrics API on the local cluster (up -metrics-server), for kubectl mpi top as most clusters serve it.
      build metrics-server metricsserver sigs.k8s.io/metrics-server/cmd/metrics-server \
        "$(modversion metricsserver sigs.k8s.io/metrics-server)" ;;
    olm-operator)
      build olm olm github.com/operator-framework/operator-lifecycle-manager/cmd/olm \
        "$(modversion olm github.com/operator-framework/operator-lifecycle-manager)" ;;
    catalog-operator)
      build catalog olm github.com/operator-framework/operator-lifecycle-manager/cmd/catalog \
        "$(modversion olm github.com/operator-framework/operator-lifecycle-manager)" ;;
    opm)
      # operator-registry's documented tags: no sqlite or gpgme through cgo.
      build opm olm github.com/operator-framework/operator-registry/cmd/opm \
        "$(modversion olm github.com/operator-framework/operator-registry)" "" \
        "json1 netgo osusergo containers_image_openpgp" ;;
    catalog-server)
      # Ours: rebuilt when its source or the pinned operator-registry changes.
      build catalog-server olm ./catalog-server \
        "$(modversion olm github.com/operator-framework/operator-registry)-$(sha256sum "$here/olm/catalog-server/main.go" | cut -c1-12)" "" \
        "netgo osusergo containers_image_openpgp" ;;
    containerd|containerd-shim-runc-v2|ctr)
      # The real nodes' container runtime, its runc shim and its client,
      # with the version they report (the kubelet shows the runtime's).
      v=$(modversion containerd github.com/containerd/containerd/v2)
      build "$component" containerd "github.com/containerd/containerd/v2/cmd/$component" "$v" \
        "-X github.com/containerd/containerd/v2/version.Version=$v" ;;
    coredns)
      # Ours: CoreDNS with the plugins the local cluster uses.
      build coredns coredns . \
        "$(modversion coredns github.com/coredns/coredns)-$(sha256sum "$here/coredns/main.go" | cut -c1-12)" ;;
    kube-router)
      # Its network policy controller only: NetworkPolicies enforced on the real nodes.
      build kube-router kuberouter github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
        "$(modversion kuberouter github.com/cloudnativelabs/kube-router/v2)" ;;
    multus)
      # The thin plugin: the real nodes' CNI, attaching NetworkAttachmentDefinitions.
      build multus multus gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus \
        "$(modversion multus gopkg.in/k8snetworkplumbingwg/multus-cni.v4)" ;;
    whereabouts)
      # The IPAM plugin of the real nodes' secondary network: addresses unique across nodes.
      build whereabouts whereabouts github.com/k8snetworkplumbingwg/whereabouts/cmd \
        "$(modversion whereabouts github.com/k8snetworkplumbingwg/whereabouts)" ;;
    openshift-scc)
      # Ours, around OpenShift's SCC admission plugin.
      build openshift-scc openshift . \
        "$(modversion openshift github.com/openshift/apiserver-library-go)-$(cat "$here"/openshift/*.go | sha256sum | cut -c1-12)" ;;
    controller-gen)
      build controller-gen ../tools sigs.k8s.io/controller-tools/cmd/controller-gen \
        "$(modversion ../tools sigs.k8s.io/controller-tools)" ;;
    staticcheck)
      build staticcheck staticcheck honnef.co/go/tools/cmd/staticcheck \
        "$(modversion staticcheck honnef.co/go/tools)" ;;
    *)
      echo "testbin: unknown component $component" >&2; exit 2 ;;
  esac
done
