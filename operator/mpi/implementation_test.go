package mpi

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
)

func TestResolveImplementation(t *testing.T) {
	cases := map[string]struct {
		value       trainer.MPIImplementation
		annotations []map[string]string
		want        Implementation
		wantErr     bool
	}{
		"empty means OpenMPI 4":   {value: "", want: OpenMPI},
		"OpenMPI":                 {value: "OpenMPI", want: OpenMPI},
		"OpenMPI 5 by annotation": {value: "OpenMPI", annotations: []map[string]string{{AnnotationOpenMPIVersion: "5"}}, want: OpenMPI5},
		"the job's annotation wins over the runtime's": {
			value:       "OpenMPI",
			annotations: []map[string]string{{AnnotationOpenMPIVersion: "4"}, {AnnotationOpenMPIVersion: "5"}},
			want:        OpenMPI,
		},
		"unknown version": {value: "OpenMPI", annotations: []map[string]string{{AnnotationOpenMPIVersion: "6"}}, wantErr: true},
		"Intel":           {value: "Intel", want: IntelMPI},
		"MPICH":           {value: "MPICH", want: MPICH},
		"unknown":         {value: "MVAPICH", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ResolveImplementation(tc.value, tc.annotations...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, wantErr %t", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseImplementation(t *testing.T) {
	for _, impl := range Implementations {
		got, err := ParseImplementation(impl.CLIName())
		if err != nil || got != impl {
			t.Errorf("ParseImplementation(%q) = %q, %v; want %q", impl.CLIName(), got, err, impl)
		}
		back, err := ResolveImplementation(impl.TrainerValue(), map[string]string{AnnotationOpenMPIVersion: map[bool]string{true: "5", false: "4"}[impl == OpenMPI5]})
		if err != nil || back != impl {
			t.Errorf("round trip of %q through the Trainer API gave %q, %v", impl, back, err)
		}
	}
	if _, err := ParseImplementation("lam"); err == nil {
		t.Error("ParseImplementation(lam) succeeded, want an error naming the choices")
	}
}
