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
