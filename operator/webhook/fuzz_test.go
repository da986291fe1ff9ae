package webhook

import (
	"encoding/json"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// FuzzAdmitResolveBuild feeds arbitrary TrainJobs and MPI runtimes through
// what the webhook and the controller do with them: validation, job
// resolution, the size check and BuildJobSet. None may panic, whatever the
// webhook would have said (it can be bypassed); and whatever the webhook
// admits must resolve and build into a JobSet of a launcher and the
// workers it promised.
func FuzzAdmitResolveBuild(f *testing.F) {
	rtJSON, err := json.Marshal(sampleRuntime(f))
	if err != nil {
		f.Fatal(err)
	}
	for _, tj := range []string{
		`{"metadata":{"name":"pi","namespace":"ml"},"spec":{"runtimeRef":{"name":"torus-openmpi"},"trainer":{"numNodes":2,"numProcPerNode":4}}}`,
		`{"metadata":{"name":"pi","annotations":{"torus-mpi.io/ssh-port":"70000"}},"spec":{"trainer":{"numNodes":2147483647}}}`,
		`{"metadata":{"name":"pi"},"spec":{"trainer":{"numNodes":-1,"env":[{"name":"OMPI_MCA_orte_default_hostfile"}]}}}`,
		`{"metadata":{"name":"pi"},"spec":{"runtimePatches":[{"manager":"x","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"metadata":{"labels":{"torus-mpi.io/job-name":"other"}}}}}}]}}}}]}}`,
		`{"metadata":{"name":"pi"},"spec":{"runtimePatches":[{"manager":"example.com/m","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"launcher","template":{"spec":{"template":{"spec":{"serviceAccountName":"sa","imagePullSecrets":[{"name":"r"}],"volumes":[{"name":"d","emptyDir":{}}],"containers":[{"name":"node","volumeMounts":[{"name":"d","mountPath":"/d"}],"securityContext":{"runAsUser":1000}}]}}}}}]}}}}]}}`,
	} {
		f.Add([]byte(tj), rtJSON)
	}
	f.Add([]byte(`{"metadata":{"name":"pi"}}`), []byte(`{"spec":{"mlPolicy":{"numNodes":0,"mpi":{"sshAuthMountPath":"/\n"}}}}`))
	f.Fuzz(func(t *testing.T, tjJSON, rtJSON []byte) {
		var tj trainer.TrainJob
		var rt trainer.ClusterTrainingRuntime
		if json.Unmarshal(tjJSON, &tj) != nil || json.Unmarshal(rtJSON, &rt) != nil {
			return
		}
		if rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.MPI == nil {
			return
		}
		runtime := &mpi.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: rt.Name, Annotations: rt.Annotations, Spec: rt.Spec}
		admitted := len(validateTrainJob(&tj, runtime, mpi.DefaultMaxNodes)) == 0 &&
			runtimeInvalid(trainer.ClusterTrainingRuntimeKind, rt.Name, rt.Annotations, rt.Spec) == nil
		job, err := mpi.ResolveJob(&tj, runtime)
		if err != nil {
			if admitted {
				t.Fatalf("admitted, but does not resolve: %v", err)
			}
			return
		}
		if err := job.CheckSize(mpi.DefaultMaxNodes); err != nil {
			if admitted {
				t.Fatalf("admitted, but too large: %v", err)
			}
			return
		}
		js, err := children.BuildJobSet(&tj, runtime, job, children.BuildOptions{ClusterDomain: mpi.DefaultClusterDomain, LaunchImage: "registry.example/torus-operator:test"})
		if err != nil {
			if admitted {
				t.Fatalf("admitted, but builds no JobSet: %v", err)
			}
			return
		}
		if !admitted {
			return
		}
		workers := int32(-1)
		for _, rj := range js.Spec.ReplicatedJobs {
			if rj.Name == mpi.NodeJob && rj.Template.Spec.Parallelism != nil {
				workers = *rj.Template.Spec.Parallelism
			}
			if pod := rj.Template.Spec.Template; pod.Labels[api.LabelJobName] != tj.Name {
				t.Fatalf("replicated job %s: pods labelled for job %q, not %q", rj.Name, pod.Labels[api.LabelJobName], tj.Name)
			}
		}
		if workers != job.Workers {
			t.Fatalf("the node job runs %d pods, the job promised %d workers", workers, job.Workers)
		}
	})
}
