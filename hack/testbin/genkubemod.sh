#!/usr/bin/env bash
# Writes hack/testbin/kube/go.mod for a k8s.io/kubernetes release: the root module
# requires its staging modules at v0.0.0 and replaces them with ./staging paths, which
# do not apply to a dependent, so each one is replaced here with its published tag.
# Run it when bumping KUBE_VERSION, then `go mod tidy` in hack/testbin/kube.
set -euo pipefail
export GOWORK=off # a release module, outside the repository's workspace
kube_version=${1:?usage: genkubemod.sh v1.X.Y}
staging_version="v0.${kube_version#v1.}"
dir=$(cd "$(dirname "$0")/kube" && pwd)
modfile=$(go mod download -json "k8s.io/kubernetes@${kube_version}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{
  echo "module github.com/torus-mpi/torus/hack/testbin/kube"
  echo
  echo "go 1.26"
  echo
  echo "require k8s.io/kubernetes ${kube_version}"
  echo
  echo "replace ("
  sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 '"${staging_version}"'#p' "$modfile"
  echo ")"
} > "$dir/go.mod"
