#!/usr/bin/env bash
# Builds the local cluster's MPI image root filesystem from Debian's
# packages (bookworm: Open MPI 4.1, MPICH 4.0, OpenSSH 9.2, mpi4py) with
# mmdebstrap, as a tarball for hack/images to wrap. Cached outside the
# clone, keyed by the recipe below (suite, packages, hooks) and pi.py, so
# a second cluster start does not rebuild it. Prints the tarball's path.
#
#   hack/images/mpi/build.sh [cache dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/torus/images}
suite=bookworm
packages=openssh-server,openssh-client,openmpi-bin,mpich,python3-mpi4py,hostname,procps
hooks=(
  'chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash mpiuser'
  'mkdir -p "$1/opt/torus" && cp '"$here"'/pi.py "$1/opt/torus/pi.py"'
  'rm -rf "$1/var/lib/apt/lists"/* "$1/var/cache/apt"/* "$1/usr/share/doc" "$1/usr/share/man"'
)
# The packages come from the machine's own apt sources (read from stdin by
# mmdebstrap), so they are part of the recipe too.
sources=/etc/apt/sources.list.d/debian.sources
if [[ ! -f $sources ]]; then
  echo "mpi image: $sources is missing: the image is built from a Debian bookworm machine's apt sources" >&2
  exit 1
fi
key=$( { echo "$suite $packages"; printf '%s\n' "${hooks[@]//$here/}"; cat "$here/pi.py" "$sources"; } | sha256sum | cut -c1-16)
out=$cache/mpi-rootfs-$key.tar
if [[ -s $out ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
if ! command -v mmdebstrap >/dev/null; then
  echo "mpi image: installing mmdebstrap" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap=1.3.5-7 >/dev/null
fi
echo "mpi image: building with mmdebstrap ($suite, minbase + $packages)" >&2
start=$SECONDS
# mmdebstrap writes a tarball only to a name ending in .tar.
tmp=$cache/.mpi-rootfs-$key.$$.tar
trap 'rm -f "$tmp"' EXIT
# The mirror is the machine's own apt source, read from stdin.
args=()
for h in "${hooks[@]}"; do args+=(--customize-hook="$h"); done
mmdebstrap --quiet --variant=minbase --include="$packages" "${args[@]}" \
  "$suite" "$tmp" - < "$sources" >&2
mv "$tmp" "$out"
# One recipe at a time: older root filesystems and the images made from
# them go.
find "$cache" -maxdepth 1 \( -name 'mpi-rootfs-*.tar' -o -name 'mpi-image-*.tar' \) ! -name "*-$key*.tar" -delete
echo "mpi image: built in $((SECONDS - start))s: $out" >&2
echo "$out"
