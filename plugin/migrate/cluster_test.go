package migrate

import (
	"errors"
	"fmt"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestOnlyRuntimeMissing(t *testing.T) {
	gk := trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind()
	ref := field.NewPath("spec", "runtimeRef")
	// As Torus's webhook words it.
	missing := func(name string) *field.Error {
		return field.Invalid(ref, name, fmt.Sprintf("%s %q not found: create it, or set spec.runtimeRef to an existing runtime", trainer.TrainingRuntimeKind, name))
	}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"the runtime is missing": {apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("pi")}), true},
		"wrapped":                {fmt.Errorf("creating: %w", apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("pi")})), true},
		"another runtime":        {apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("other")}), false},
		"and something else": {apierrors.NewInvalid(gk, "pi", field.ErrorList{missing("pi"),
			field.Invalid(field.NewPath("spec", "trainer", "numNodes"), 0, "must be at least 1")}), false},
		"not invalid":      {apierrors.NewForbidden(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), "pi", errors.New("no")), false},
		"no causes":        {apierrors.NewInvalid(gk, "pi", nil), false},
		"not an API error": {errors.New(`TrainingRuntime "pi" not found`), false},
	}
	for name, tc := range cases {
		if got := OnlyRuntimeMissing(tc.err, "pi"); got != tc.want {
			t.Errorf("%s: OnlyRuntimeMissing(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}
