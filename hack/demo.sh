#!/usr/bin/env bash
# make demo: the local control plane with Kueue, JobSet and kwok lands with
# issue 3 (local cluster and gang scheduling). Until then this says so.
echo "make demo needs the local cluster (hack/cluster), which is not built yet." >&2
echo "Meanwhile: make test runs the operator against a real kube-apiserver and etcd." >&2
exit 1
