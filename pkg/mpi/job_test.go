package mpi_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// The job a JobSet records is the job Torus tracks once the JobSet exists.
func TestJobRecordRoundTrip(t *testing.T) {
	job := &mpi.Job{Name: "pi", Namespace: "ml", Implementation: mpi.OpenMPI, NumNodes: 3, Workers: 3, SlotsPerHost: 4,
		SSH: mpi.SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222}, Network: &mpi.NetworkPlan{Profile: "ib", AllPods: true}}
	enc, err := mpi.EncodeJob(job)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := mpi.DecodeJob(enc)
	if !ok || !reflect.DeepEqual(got, job) {
		t.Fatalf("DecodeJob(EncodeJob(job)) = %+v, %t; want %+v", got, ok, job)
	}
	for name, s := range map[string]string{"none (an older operator's JobSet)": "", "garbage": "{", "no workers": `{"Workers":0,"SlotsPerHost":1}`} {
		if _, ok := mpi.DecodeJob(s); ok {
			t.Errorf("%s: decoded", name)
		}
	}
}

// A job whose record would be longer than the cache keeps is refused where
// it is built, with what to change.
func TestEncodeJobRefusesARecordTheCacheWouldDrop(t *testing.T) {
	job := &mpi.Job{Name: "pi", Workers: 1, SlotsPerHost: 1, Network: &mpi.NetworkPlan{Profile: "ib"}}
	for i := range 2000 {
		job.Network.Env = append(job.Network.Env, corev1.EnvVar{Name: "NCCL_VAR_" + strconv.Itoa(i), Value: "value"})
	}
	_, err := mpi.EncodeJob(job)
	if err == nil || !strings.Contains(err.Error(), "ib") || !strings.Contains(err.Error(), "env") {
		t.Errorf("EncodeJob of a %d-variable profile: %v, want a refusal naming the profile and its env", len(job.Network.Env), err)
	}
}

// More ranks on a worker than it has GPUs is worth a warning, never a
// refusal: a program may share GPUs on purpose.
func TestGPUWarnings(t *testing.T) {
	gpu := []corev1.ResourceName{"nvidia.com/gpu"}
	cases := []struct {
		slots int32
		gpus  int64
		want  string
	}{
		{slots: 4, gpus: 0},
		{slots: 2, gpus: 2},
		{slots: 1, gpus: 8},
		{slots: 4, gpus: 2, want: `each worker runs 4 ranks on 2 GPUs (nvidia.com/gpu): NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU detected"), and ranks that choose their GPU by local rank find none past the 2nd; give each rank a GPU (numProcPerNode 2: kubectl mpi run --slots-per-worker 2) unless the program shares GPUs on purpose`},
		{slots: 12, gpus: 11, want: "find none past the 11th"},
		{slots: 2, gpus: 1, want: "find none past the 1st"},
	}
	for _, tc := range cases {
		got := strings.Join(mpi.GPUWarnings(&mpi.Job{SlotsPerHost: tc.slots}, tc.gpus, gpu), "\n")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%d ranks on %d GPUs: %q, want %q", tc.slots, tc.gpus, got, tc.want)
		}
	}
}
