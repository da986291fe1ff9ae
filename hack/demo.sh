#!/usr/bin/env bash
# make demo: the main job on a local default. Starts the local cluster
# (unless it runs already) and creates a Kueue queue. Where a real node can
# run (root; test/localcluster node-check), it submits an Open MPI job of 2
# workers x 2 ranks to it with `kubectl mpi run`: real sshd on the workers,
# real mpirun in the launcher, pi computed by 4 ranks and read back with
# `kubectl mpi logs`, `kubectl mpi exec-rank` answering from a rank's
# container. Elsewhere it says why, and runs a job of 2 workers x 4 GPUs on
# the simulated (kwok) GPU nodes. Either way it follows the job to the end
# and shows it with `kubectl mpi describe`.
#
#   DEMO_NODE=real|kwok  force one (default: real where it can run)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export KUBECONFIG=$root/.cluster/kubeconfig
kubectl=$root/.testbin/bin/kubectl
kubectl_mpi=$root/bin/kubectl-mpi
job=${DEMO_JOB:-pi-demo}
cluster=$root/bin/torus-cluster
go build -o "$cluster" ./test/localcluster

node=${DEMO_NODE:-auto}
if [[ $node == auto ]]; then
  if why=$("$cluster" node-check -testbin "$root/.testbin/bin" 2>&1); then
    node=real
  else
    node=kwok
    echo "== No real node on this machine: ${why#cluster: }"
    echo "   The job runs on simulated (kwok) nodes instead."
  fi
fi
up_flags=()
[[ $node == real ]] && up_flags=(-real-node)

# A cluster with a dead component, or without the real node the demo
# needs, is stopped and started afresh.
if ! status=$("$cluster" status -dir "$root/.cluster" 2>&1) ||
  { [[ $node == real ]] && ! grep -q '^kubelet ' <<<"$status"; }; then
  "$cluster" down -dir "$root/.cluster" >/dev/null
  "$cluster" up -dir "$root/.cluster" -testbin "$root/.testbin/bin" -operator "$root/bin/torus-operator" "${up_flags[@]}"
fi

# dead: when a component of the cluster has died, say which with the end of
# its log, and what kubectl mpi makes of the job.
dead() {
  local status
  if status=$("$cluster" status -dir "$root/.cluster" 2>&1); then
    return 1
  fi
  echo "== The local cluster is broken:"
  echo "$status"
  echo "== kubectl mpi describe $job"
  $kubectl_mpi describe "$job" || true
  return 0
}

echo "== A Kueue queue with 8 GPUs"
$kubectl apply -f - <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: demo
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "64"}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: "8"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: default
  namespace: default
spec:
  clusterQueue: demo
YAML
$kubectl_mpi delete "$job" --wait >/dev/null 2>&1 || true
if [[ $node == real ]]; then
  # torus-openmpi-local: the shipped torus-openmpi runtime on the Open MPI
  # image built here (test/localcluster/images/mpi), on the real node. The launcher
  # holds the job open once pi is computed until the demo has reached a
  # rank with exec-rank, then releases it.
  echo "== kubectl mpi run $job: Open MPI 4 on the real nodes, 2 workers x 2 ranks, queue 'default'"
  $kubectl_mpi run "$job" --runtime torus-openmpi-local --workers 2 --slots-per-worker 2 --cpu 500m --memory 512Mi \
    --queue default -- sh -c 'mpirun -n 4 python3 /opt/torus/pi.py && until [ -e /tmp/release ]; do sleep 0.2; done'
else
  # The operator installs its default runtimes when it starts.
  $kubectl wait --for=create clustertrainingruntime/torus-openmpi --timeout=2m >/dev/null
  echo "== kubectl mpi run $job: Open MPI, 2 workers x 4 GPUs on simulated nodes, queue 'default'"
  $kubectl_mpi run "$job" --image mpioperator/mpi-pi:openmpi --workers 2 --gpus 4 --cpu 2 --memory 4Gi \
    --queue default -- mpirun -n 8 /home/mpiuser/pi
fi

# computed: on the real node, once the launcher has printed pi, show it
# from the logs, reach rank 1 in its container, and release the launcher.
shown=""
computed() {
  [[ $node == real && -z $shown ]] || return 0
  $kubectl_mpi logs "$job" --launcher 2>/dev/null | grep -q 'pi is' || return 0
  shown=1
  echo "== kubectl mpi logs $job --launcher: the ranks' result"
  $kubectl_mpi logs "$job" --launcher
  echo "== kubectl mpi exec-rank $job 1 -- hostname: rank 1's container"
  $kubectl_mpi exec-rank "$job" 1 -- hostname
  local launcher
  launcher=$($kubectl get pods -l "jobset.sigs.k8s.io/jobset-name=$job,jobset.sigs.k8s.io/replicatedjob-name=launcher" \
    --field-selector status.phase=Running -o name)
  $kubectl exec "$launcher" -c node -- touch /tmp/release
}

# jsonpath, unlike go-template, prints nothing for a status not yet written.
conditions() { # status: the types of the conditions with that status
  $kubectl get trainjob "$job" -o jsonpath="{range .status.conditions[?(@.status==\"$1\")]}{.type} {end}" 2>/dev/null || true
}
message() { # type
  $kubectl get trainjob "$job" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].message}" 2>/dev/null || true
}
last=""
start=$SECONDS
checked=0
while (( SECONDS - start < 180 )); do
  conds=$(conditions True)
  case " $conds " in
    *" Complete "*) now=Complete ;;
    *" Failed "*) now=Failed ;;
    *" Running "*) now=Running ;;
    *) now=Pending ;;
  esac
  if [[ $now != "$last" ]]; then
    why=$(message Running)
    [[ -z $why ]] && why="submitted"
    [[ $now == Complete ]] && why=$(message Complete)
    [[ $now == Failed ]] && why=$(message Failed)
    printf '%4ds  %-9s %s\n' $((SECONDS - start)) "$now" "$why"
    if [[ $now == Running ]]; then
      echo "== Queue while it runs"
      $kubectl get clusterqueue demo -o wide
      $kubectl get workloads -n default
      $kubectl get pods -n default -l torus-mpi.io/job-name="$job" -o wide
    fi
    last=$now
  fi
  if [[ $now == Running ]]; then computed; fi
  if [[ $now == Complete || $now == Failed ]]; then break; fi
  if (( SECONDS - start >= checked + 2 )); then
    checked=$((SECONDS - start))
    if dead; then exit 1; fi
  fi
  sleep 0.5
done

echo "== kubectl mpi describe $job"
$kubectl_mpi describe "$job"
echo
echo "The cluster keeps running (KUBECONFIG=$KUBECONFIG). Stop it with: make cluster-down"
[[ $last == Complete ]]
