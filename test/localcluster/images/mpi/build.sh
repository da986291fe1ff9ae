#!/usr/bin/env bash
# Builds a root filesystem of the local cluster's MPI images from Debian's
# packages with mmdebstrap, as a tarball for test/localcluster/images to wrap:
#
#   bookworm  Open MPI 4.1, OpenSSH 9.2, Python 3 (also as `python`),
#             mpi4py, NumPy; /opt/torus/pi.py and
#             /opt/torus/train.py, the reference training, with the digits
#             data set scikit-learn ships (scikit-learn itself is removed:
#             bookworm's SciPy depends on a compiler); and, as
#             upstream Trainer's MPI runtime images (DeepSpeed, MLX) have it
#             from mpi-operator's base image, /home/mpiuser/.sshd_config:
#             that image's sshd configuration, read from the pinned
#             mpi-operator module, with its port
#   trixie    MPICH 4.2, Open MPI 5.0, OpenSSH 10.0; /opt/torus/pi-mpich and
#             /opt/torus/pi-openmpi5, pi.c compiled in the image, whose
#             compiler is then removed
#   SUITE-nossh
#             the suite's image with every OpenSSH package purged: an image
#             holding MPI and the programs alone, as jobs using Torus's
#             launch agent need (Debian's MPI packages depend on an ssh
#             client, so the purge forces past that dependency). Built as
#             a layer over the suite's root filesystem, so a node's image
#             store holds that filesystem once for both images. Its
#             /home/mpiuser is writable by the root group, for the UIDs
#             OpenShift assigns
#
# MPICH comes from trixie: bookworm's MPICH 4.0.2 hangs in MPI_Finalize in
# about one run of three between two pods (its UCX's tcp transport spins in
# uct_tcp_iface_progress under PMPI_Finalize), which 4.2.1 does not.
#
# Cached outside the clone, keyed by the recipe below (suite, packages,
# hooks, mirror) and the programs, so a second cluster start does not
# rebuild it. Prints the image's layers' tarballs, bottom first, a line
# each.
#
#   test/localcluster/images/mpi/build.sh bookworm|trixie [cache dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=${1:?usage: build.sh bookworm|trixie[-nossh] [cache dir]}
cache=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/torus/images}

if [[ $suite == *-nossh ]]; then
  base_suite=${suite%-nossh}
  base=$("$0" "$base_suite" "$cache")
  # The layer's own recipe, after the purge: without sshd, whose
  # StrictModes refuses a group-writable home, the home is the root
  # group's to write, as OpenShift's guidelines for arbitrary UIDs have
  # it: a UID the platform assigns (GID 0) writes there what the Kubeflow
  # SDK puts in it (a CustomTrainer's script, on every rank).
  home_recipe='chgrp 0 /home/mpiuser && chmod 0770 /home/mpiuser'
  key=${base##*/mpi-rootfs-$base_suite-}-$(echo "$home_recipe" | sha256sum | cut -c1-8)
  out=$cache/mpi-layer-$suite-$key
  if [[ -s $out ]]; then
    printf '%s\n' "$base" "$out"
    exit 0
  fi
  exec 9>"$cache/.mpi-layer-$suite.lock"
  flock 9
  if [[ ! -s $out ]]; then
    start=$SECONDS
    work=$(mktemp -d "$cache/.mpi-layer-$suite.XXXXXX")
    root=$work/root
    tmp=$out.$$.tmp
    trap 'rm -rf "$work" "$tmp"' EXIT
    mkdir "$root"
    tar -xf "$base" -C "$root"
    # Every entry with what a change shows in (mtime, size, mode, owner,
    # link target), sorted by path: the listings before and after the
    # purge tell what the layer holds.
    listing() { (cd "$root" && find . -mindepth 1 -printf '%p\t%T@ %s %m %U %G %l\n') | LC_ALL=C sort; }
    listing >"$work/before"
    # dpkg purges without apt: no package lists are needed, none are fetched.
    ssh_packages=$(chroot "$root" dpkg-query -W -f '${db:Status-Status} ${Package}\n' 'openssh-*' | awk '$1 == "installed" {print $2}')
    if ! log=$(chroot "$root" dpkg --purge --force-depends $ssh_packages 2>&1); then
      echo "$log" >&2
      exit 1
    fi
    rm -rf "$root/home/mpiuser/.sshd_config" "$root/etc/ssh"
    chroot "$root" sh -c "$home_recipe"
    listing >"$work/after"
    export LC_ALL=C
    # What is new or changed goes in as it is now; what is gone, as a
    # whiteout (.wh.NAME) of the topmost path gone; each with its parent
    # directories, as they are now, so the layer restores none of their
    # owners or modes to a default.
    cut -f1 "$work/before" >"$work/before.paths"
    cut -f1 "$work/after" >"$work/after.paths"
    comm -13 "$work/before" "$work/after" | cut -f1 >"$work/entries"
    comm -23 "$work/before.paths" "$work/after.paths" |
      awk '{ gone[$0] = 1; order[NR] = $0 }
           END { for (i = 1; i <= NR; i++) { p = q = order[i]; top = 1
                   while (sub(/\/[^\/]*$/, "", q)) if (q in gone) { top = 0; break }
                   if (top) print p } }' >"$work/gone"
    while IFS= read -r p; do
      wh="$(dirname "$p")/.wh.$(basename "$p")"
      : >"$root/$wh"
      echo "$wh" >>"$work/entries"
    done <"$work/gone"
    awk '{ print; q = $0; while (sub(/\/[^\/]*$/, "", q) && q != ".") print q }' "$work/entries" | sort -u >"$work/layer"
    tar --numeric-owner --no-recursion -cf "$tmp" -C "$root" -T "$work/layer"
    mv "$tmp" "$out"
    find "$cache" -maxdepth 1 \( -name "mpi-layer-$suite-*.tar" -o -name "mpi-rootfs-$suite-*.tar" \) ! -name "$(basename "$out")" -delete
    echo "mpi image: $suite (purged: $(echo $ssh_packages); $(wc -l <"$work/gone") paths gone) in $((SECONDS - start))s: $out" >&2
  fi
  printf '%s\n' "$base" "$out"
  exit 0
fi

# The packages come from the machine's own apt sources (Debian's mirror).
sources=/etc/apt/sources.list.d/debian.sources
if [[ ! -f $sources ]]; then
  echo "mpi image: $sources is missing: the images are built from a Debian machine's apt sources" >&2
  exit 1
fi
mirror=$(awk '/^URIs:/ {print $2; exit}' "$sources")

hooks=('chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash mpiuser')
build_packages=
case $suite in
bookworm)
  # python-is-python3: the Kubeflow SDK runs a CustomTrainer's function
  # with `python`.
  packages=openssh-server,openssh-client,openmpi-bin,python3-mpi4py,python3-numpy,python-is-python3,hostname,procps
  build_packages=python3-sklearn
  mpi_operator=$(cd "$here/../../.." && go mod download -json github.com/kubeflow/mpi-operator | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  upstream_sshd=$mpi_operator/build/base/sshd_config
  if [[ ! -f $upstream_sshd ]]; then
    echo "mpi image: mpi-operator's base sshd configuration is missing ($upstream_sshd)" >&2
    exit 1
  fi
  hooks+=(
    'mkdir -p "$1/opt/torus/data" && cp '"$here"'/pi.py '"$here"'/train.py "$1/opt/torus/"'
    'cp "$1/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz" "$1/opt/torus/data/"'
    # What the runtime packages only suggest (a compiler, headers) goes
    # with scikit-learn: they were never installed for the image's sake.
    'chroot "$1" apt-get purge -qq -y --auto-remove -o APT::AutoRemove::RecommendsImportant=false -o APT::AutoRemove::SuggestsImportant=false '"${build_packages//,/ }"' >/dev/null'
    '{ cat '"$upstream_sshd"'; echo "Port 2222"; } > "$1/home/mpiuser/.sshd_config" && chroot "$1" chown mpiuser: /home/mpiuser/.sshd_config'
  )
  ;;
trixie)
  packages=openssh-server,openssh-client,mpich,openmpi-bin,hostname,procps
  build_packages=gcc,libc6-dev,libmpich-dev,libopenmpi-dev
  hooks+=(
    'mkdir -p "$1/opt/torus" && cp '"$here"'/pi.c "$1/opt/torus/pi.c"'
    'chroot "$1" mpicc.mpich -O2 -Wall -o /opt/torus/pi-mpich /opt/torus/pi.c -lm'
    'chroot "$1" mpicc.openmpi -O2 -Wall -o /opt/torus/pi-openmpi5 /opt/torus/pi.c -lm'
    'chroot "$1" apt-get purge -qq -y --auto-remove '"${build_packages//,/ }"' >/dev/null'
    # useradd in trixie makes homes 0700; a pod running as a UID OpenShift
    # assigns (GID 0) must pass through to the SSH directory, as bookworm
    # homes (0755) let it. Not group-writable, for the StrictModes of sshd.
    'chroot "$1" chgrp 0 /home/mpiuser && chroot "$1" chmod 0750 /home/mpiuser'
  )
  ;;
*)
  echo "mpi image: unknown suite $suite (bookworm or trixie)" >&2
  exit 2
  ;;
esac
hooks+=('rm -rf "$1/var/lib/apt/lists"/* "$1/var/cache/apt"/* "$1/usr/share/doc" "$1/usr/share/man"')

key=$( { echo "$suite $mirror $packages $build_packages"; printf '%s\n' "${hooks[@]//$here/}"; cat "$here/pi.py" "$here/train.py" "$here/pi.c" ${upstream_sshd:+"$upstream_sshd"}; } | sha256sum | cut -c1-16)
out=$cache/mpi-rootfs-$suite-$key.tar
if [[ -s $out ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
# One build of a suite at a time: a second caller (cluster up while make
# test's prefetch builds) waits for the first and takes its result.
exec 9>"$cache/.mpi-rootfs-$suite.lock"
flock 9
if [[ -s $out ]]; then
  echo "$out"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
  echo "mpi image: installing mmdebstrap" >&2
  # Another apt (the machine's daily update) may hold the locks: wait for
  # them; a mirror's dropped connection is tried again.
  apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3 \
    install -y -qq --no-install-recommends mmdebstrap=1.3.5-7 >/dev/null
fi
echo "mpi image: building with mmdebstrap ($suite, minbase + $packages)" >&2
start=$SECONDS
# mmdebstrap writes a tarball only to a name ending in .tar.
tmp=$cache/.mpi-rootfs-$suite-$key.$$.tar
trap 'rm -f "$tmp"' EXIT
args=()
for h in "${hooks[@]}"; do args+=(--customize-hook="$h"); done
include=$packages${build_packages:+,$build_packages}
mmdebstrap --quiet --variant=minbase --aptopt='Acquire::Retries "3"' --include="$include" "${args[@]}" \
  "$suite" "$tmp" "deb $mirror $suite main" >&2
mv "$tmp" "$out"
# One recipe a suite at a time: older root filesystems and the images made
# from them go.
find "$cache" -maxdepth 1 \( -name "mpi-rootfs-$suite-*.tar" -o -name "mpi-image-$suite-*.tar" -o -name 'mpi-rootfs-????????????????.tar' -o -name 'mpi-image-????????????????-*.tar' \) ! -name "*-$key*.tar" -delete
echo "mpi image: built in $((SECONDS - start))s: $out" >&2
echo "$out"
