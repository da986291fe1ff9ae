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

// TestImplementationTable checks what adding an entry must get right: every
// fact set, no --mpi spelling or runtime shared, and each Trainer value
// resolving to its first entry by default and to every entry by version.
func TestImplementationTable(t *testing.T) {
	spellings, runtimes := map[string]Implementation{}, map[string]Implementation{}
	for _, f := range table {
		if f.display == "" || len(f.cliNames) == 0 || f.runtime == "" || f.trainer == "" || f.slotsSeparator == "" || f.env == nil {
			t.Errorf("%s: a fact is missing: %+v", f.impl, f)
		}
		for _, n := range f.cliNames {
			if other, ok := spellings[n]; ok {
				t.Errorf("--mpi %s names both %s and %s", n, other, f.impl)
			}
			spellings[n] = f.impl
		}
		if other, ok := runtimes[f.runtime]; ok {
			t.Errorf("runtime %s serves both %s and %s", f.runtime, other, f.impl)
		}
		runtimes[f.runtime] = f.impl
		if len(f.env("2", "-F x")) == 0 {
			t.Errorf("%s: the launcher gets no environment", f.impl)
		}
		got, err := ResolveImplementation(f.trainer, map[string]string{AnnotationOpenMPIVersion: f.openMPIVersion})
		if f.openMPIVersion == "" {
			got, err = ResolveImplementation(f.trainer)
		}
		if err != nil || got != f.impl {
			t.Errorf("%s: resolved as %q, %v", f.impl, got, err)
		}
	}
	if got, _ := ResolveImplementation(""); got != table[0].impl {
		t.Errorf("an empty mpiImplementation resolves to %s, want %s (the CRD's default)", got, table[0].impl)
	}
	if got := Implementation("MVAPICH").DisplayName(); got != "MVAPICH" {
		t.Errorf("an unknown implementation is displayed as %q", got)
	}
}
