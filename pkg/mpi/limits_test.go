package mpi_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// Sizes no configuration admits are refused by resolution itself, before a
// placement or a hostfile is computed from them (MaxInt32 nodes overflowed
// a capacity and panicked; 10^6 built a hostfile larger than the
// operator's memory).
func TestResolveJobBounds(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI)
	cases := []struct {
		name     string
		job      *trainer.TrainJob
		wantErr  string
		wantSize bool
	}{
		{"MaxInt32 nodes", wrappers.MakeTrainJob("j", "ns").RuntimeRef("rt").NumNodes(math.MaxInt32).Obj(), "numNodes is 2147483647: Torus runs at most 65536 nodes a job", true},
		{"no nodes", wrappers.MakeTrainJob("j", "ns").RuntimeRef("rt").NumNodes(0).Obj(), "numNodes is 0: a job needs at least 1 node", true},
		{"negative nodes", wrappers.MakeTrainJob("j", "ns").RuntimeRef("rt").NumNodes(-3).Obj(), "numNodes is -3", true},
		{"MaxInt32 slots", wrappers.MakeTrainJob("j", "ns").RuntimeRef("rt").NumProcPerNode(math.MaxInt32).Obj(), "numProcPerNode is 2147483647: Torus runs at most 4096 ranks a node", true},
		{"the largest job", wrappers.MakeTrainJob("j", "ns").RuntimeRef("rt").NumNodes(mpi.AbsoluteMaxNodes).NumProcPerNode(mpi.MaxSlotsPerNode).Obj(), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job, err := mpi.ResolveJob(tc.job, rt.Runtime())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ResolveJob: %v", err)
				}
				// Its rank count still fits the int32s MPI counts ranks in.
				if got := job.Placement().Size(); got != mpi.AbsoluteMaxNodes*mpi.MaxSlotsPerNode {
					t.Errorf("ranks = %d", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ResolveJob error = %v, want it to say %q", err, tc.wantErr)
			}
			var sizeErr *mpi.SizeError
			if errors.As(err, &sizeErr) != tc.wantSize {
				t.Errorf("error %v is a SizeError: %v", err, !tc.wantSize)
			}
		})
	}
}

// The default maximum fits in the job's Secret for short names; longer names
// are refused by the hostfile's size, with how many workers would fit.
func TestCheckSize(t *testing.T) {
	longest := strings.Repeat("j", mpi.MaxTrainJobNameLength(mpi.DefaultMaxNodes))
	cases := []struct {
		name      string
		jobName   string
		namespace string
		impl      trainer.MPIImplementation
		nodes     int32
		maxNodes  int32
		wantErr   string
	}{
		{"default maximum, short names, Open MPI", "big", "default", trainer.MPIImplementationOpenMPI, mpi.DefaultMaxNodes, mpi.DefaultMaxNodes, ""},
		{"default maximum, short names, MPICH", "big", "default", trainer.MPIImplementationMPICH, mpi.DefaultMaxNodes, mpi.DefaultMaxNodes, ""},
		{"over the configured maximum", "pi", "default", trainer.MPIImplementationOpenMPI, 9, 8, "numNodes is 9, more than the 8 nodes this Torus operator runs (its --max-nodes)"},
		{"default maximum, the longest job name", longest, "a-namespace", trainer.MPIImplementationOpenMPI, mpi.DefaultMaxNodes, mpi.DefaultMaxNodes,
			"more than the 983040 the job's Secret holds beside its keys: use at most 8910 workers with this job name and namespace, or shorter names"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := wrappers.MakeTrainJob(tc.jobName, tc.namespace).RuntimeRef("rt").NumNodes(tc.nodes).Obj()
			job, err := mpi.ResolveJob(tj, wrappers.MakeMPIRuntime("rt", tc.impl).Runtime())
			if err != nil {
				t.Fatalf("ResolveJob: %v", err)
			}
			err = job.CheckSize(tc.maxNodes)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckSize: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckSize error = %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}

// What reaches scripts and configuration files, and sshd's port, is
// checked at resolution, for the webhook and the controller alike.
func TestResolveJobSSHSettings(t *testing.T) {
	cases := []struct {
		name, sshPath, port, keyAlg, wantErr string
	}{
		{name: "defaults"},
		{name: "another directory", sshPath: "/home/u/.ssh"},
		{name: "another port", port: "2022"},
		{name: "a privileged port", port: "22", wantErr: "set it to a port number between 1024 and 65535 (sshd runs as the pod's non-root user"},
		{name: "not a port", port: "x", wantErr: `annotation torus-mpi.io/ssh-port="x"`},
		{name: "a newline in the path", sshPath: "/home/u/.ssh\nPermitRootLogin yes", wantErr: "set it to a clean absolute directory path"},
		{name: "a relative path", sshPath: "home/.ssh", wantErr: "set it to a clean absolute directory path"},
		{name: "a path with ..", sshPath: "/home/../etc", wantErr: "set it to a clean absolute directory path"},
		{name: "a shell word", sshPath: "/tmp/$(id)", wantErr: "set it to a clean absolute directory path"},
		{name: "the root", sshPath: "/", wantErr: "set it to a clean absolute directory path"},
		{name: "FIPS keys", keyAlg: "ecdsa-p384"},
		{name: "RSA keys", keyAlg: "rsa-3072"},
		{name: "DSA keys", keyAlg: "dsa", wantErr: `annotation torus-mpi.io/ssh-key-algorithm: unknown SSH key algorithm "dsa": use ed25519, ecdsa-p256, ecdsa-p384 (FIPS) or rsa-3072 (FIPS)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI)
			if tc.sshPath != "" {
				rt.Spec.MLPolicy.MPI.SSHAuthMountPath = &tc.sshPath
			}
			tj := wrappers.MakeTrainJob("j", "ns").RuntimeRef("rt")
			if tc.port != "" {
				tj = tj.Annotation(api.AnnotationSSHPort, tc.port)
			}
			if tc.keyAlg != "" {
				tj = tj.Annotation(api.AnnotationSSHKeyAlgorithm, tc.keyAlg)
			}
			job, err := mpi.ResolveJob(tj.Obj(), rt.Runtime())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ResolveJob: %v", err)
				}
				if job.SSH.KeyAlgorithm != mpi.KeyAlgorithm(tc.keyAlg) {
					t.Errorf("key algorithm %q, want %q", job.SSH.KeyAlgorithm, tc.keyAlg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ResolveJob error = %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}
