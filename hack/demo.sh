#!/usr/bin/env bash
# make demo: the main job on a local default. Starts the local cluster
# (unless it runs already), creates a Kueue queue with 8 GPUs, submits an
# Open MPI job of 2 workers x 4 GPUs, and follows it to the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export KUBECONFIG=$root/.cluster/kubeconfig
kubectl=$root/.testbin/bin/kubectl
job=${DEMO_JOB:-pi-demo}

if ! go run ./hack/cluster status -dir "$root/.cluster" >/dev/null 2>&1; then
  go run ./hack/cluster up -dir "$root/.cluster" -testbin "$root/.testbin/bin" -operator "$root/bin/torus-operator"
fi

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

echo "== Submitting $job: Open MPI, 2 workers x 4 GPUs, queue 'default'"
$kubectl delete trainjob "$job" --ignore-not-found --wait=true >/dev/null
$kubectl create -f - <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $job
  labels:
    kueue.x-k8s.io/queue-name: default
spec:
  runtimeRef:
    name: torus-openmpi
  trainer:
    numNodes: 2
    numProcPerNode: 4
    resourcesPerNode:
      requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "4"}
      limits: {memory: 4Gi, nvidia.com/gpu: "4"}
YAML

# jsonpath, unlike go-template, prints nothing for a status not yet written.
conditions() { # status: the types of the conditions with that status
  $kubectl get trainjob "$job" -o jsonpath="{range .status.conditions[?(@.status==\"$1\")]}{.type} {end}" 2>/dev/null || true
}
message() { # type
  $kubectl get trainjob "$job" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].message}" 2>/dev/null || true
}
last=""
start=$SECONDS
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
  sleep 0.5
done

echo "== $job"
$kubectl describe trainjob "$job" | sed -n '/^Status:/,$p'
echo
echo "The cluster keeps running (KUBECONFIG=$KUBECONFIG). Stop it with: make cluster-down"
[[ $last == Complete ]]
