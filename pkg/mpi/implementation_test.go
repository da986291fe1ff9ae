package mpi

import (
	"maps"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/torus-mpi/torus/api"
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
		"OpenMPI 5 by annotation": {value: "OpenMPI", annotations: []map[string]string{{api.AnnotationOpenMPIVersion: "5"}}, want: OpenMPI5},
		"the job's annotation wins over the runtime's": {
			value:       "OpenMPI",
			annotations: []map[string]string{{api.AnnotationOpenMPIVersion: "4"}, {api.AnnotationOpenMPIVersion: "5"}},
			want:        OpenMPI,
		},
		"unknown version": {value: "OpenMPI", annotations: []map[string]string{{api.AnnotationOpenMPIVersion: "6"}}, wantErr: true},
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
		back, err := ResolveImplementation(impl.TrainerValue(), map[string]string{api.AnnotationOpenMPIVersion: map[bool]string{true: "5", false: "4"}[impl == OpenMPI5]})
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
		got, err := ResolveImplementation(f.trainer, map[string]string{api.AnnotationOpenMPIVersion: f.openMPIVersion})
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

func TestSelectOn(t *testing.T) {
	cases := map[string]struct {
		impl, runtime Implementation
		before        map[string]string
		want          map[string]string
		ok            bool
	}{
		"the runtime's own":                   {impl: MPICH, runtime: MPICH, before: map[string]string{}, want: map[string]string{}, ok: true},
		"Open MPI 5 on an Open MPI 4 runtime": {impl: OpenMPI5, runtime: OpenMPI, before: map[string]string{}, want: map[string]string{api.AnnotationOpenMPIVersion: "5"}, ok: true},
		"Open MPI 4 on a runtime set to 5":    {impl: OpenMPI, runtime: OpenMPI5, before: map[string]string{"a": "b"}, want: map[string]string{"a": "b", api.AnnotationOpenMPIVersion: "4"}, ok: true},
		"MPICH on an Open MPI runtime":        {impl: MPICH, runtime: OpenMPI, before: map[string]string{}, want: map[string]string{}},
		"Open MPI 5 on an Intel MPI runtime":  {impl: OpenMPI5, runtime: IntelMPI, before: map[string]string{}, want: map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if ok := tc.impl.SelectOn(tc.before, tc.runtime); ok != tc.ok {
				t.Fatalf("SelectOn = %v, want %v", ok, tc.ok)
			}
			if !maps.Equal(tc.before, tc.want) {
				t.Errorf("annotations = %v, want %v", tc.before, tc.want)
			}
			if !tc.ok {
				return
			}
			got, err := ResolveImplementation(tc.runtime.TrainerValue(), tc.before)
			if err != nil || got != tc.impl {
				t.Errorf("the job resolves to %q (%v), want %q", got, err, tc.impl)
			}
		})
	}
}

func TestIsTrainerDefault(t *testing.T) {
	for _, i := range Implementations {
		want := i != OpenMPI5
		if got := i.IsTrainerDefault(); got != want {
			t.Errorf("%s.IsTrainerDefault() = %v, want %v", i, got, want)
		}
		if got, _ := ResolveImplementation(i.TrainerValue()); (got == i) != want {
			t.Errorf("%s: with no annotation its Trainer value resolves to %s", i, got)
		}
	}
}
