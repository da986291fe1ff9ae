#!/usr/bin/env bash
# make demo: the main job on a local default. Starts the local cluster
# (unless it runs already), creates a Kueue queue with 8 GPUs, submits an
# Open MPI job of 2 workers x 4 GPUs with `kubectl mpi run`, follows it to
# the end and shows it with `kubectl mpi describe`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export KUBECONFIG=$root/.cluster/kubeconfig
kubectl=$root/.testbin/bin/kubectl
kubectl_mpi=$root/bin/kubectl-mpi
job=${DEMO_JOB:-pi-demo}
cluster=$root/bin/torus-cluster
go build -o "$cluster" ./hack/cluster

# A cluster with a dead component is stopped and started afresh.
if ! "$cluster" status -dir "$root/.cluster" >/dev/null 2>&1; then
  "$cluster" down -dir "$root/.cluster" >/dev/null
  "$cluster" up -dir "$root/.cluster" -testbin "$root/.testbin/bin" -operator "$root/bin/torus-operator"
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
$kubectl apply -f samples/runtimes/torus-openmpi.yaml

echo "== kubectl mpi run $job: Open MPI, 2 workers x 4 GPUs, queue 'default'"
$kubectl_mpi delete "$job" --wait >/dev/null 2>&1 || true
$kubectl_mpi run "$job" --image mpioperator/mpi-pi:openmpi --workers 2 --gpus 4 --cpu 2 --memory 4Gi \
  --queue default -- mpirun -n 8 /home/mpiuser/pi

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
