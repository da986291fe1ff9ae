package webhook

import (
	"encoding/json"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// maxJobSetBytes bounds the JobSet Torus makes of a TrainJob. etcd refuses
// a write over 1.5 MiB by default (--max-request-bytes), and the JobSet's
// Jobs and pods carry the same pod templates; a JobSet that cannot be
// stored would leave the job waiting with nothing to say why. The margin
// covers the JobSet's status and managed fields and a cluster's defaults.
const maxJobSetBytes = 1 << 20

// sizingImage stands for Torus's image in the JobSet the webhook sizes:
// the operator's real reference differs by a few bytes in each container.
const sizingImage = "registry.invalid/torus-mpi/torus-operator@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// jobSetSizeErrors refuses a job whose JobSet would be larger than
// maxJobSetBytes, naming the part of the TrainJob that makes it large: its
// environment and command are copied into the launcher's and the workers'
// pod templates, its runtime patches merged into them.
func jobSetSizeErrors(tj *trainer.TrainJob, rt *mpi.Runtime, job *mpi.Job) field.ErrorList {
	js, err := children.BuildJobSet(tj, rt, job, children.BuildOptions{ClusterDomain: mpi.DefaultClusterDomain, LaunchImage: sizingImage})
	if err != nil {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "runtimePatches"), err.Error())}
	}
	raw, err := json.Marshal(js)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), fmt.Errorf("encoding the job's JobSet: %w", err))}
	}
	if len(raw) <= maxJobSetBytes {
		return nil
	}
	path, what, fix := field.NewPath("spec", "runtimeRef"), "the runtime's template", "use a runtime with a smaller template"
	largest := 0
	for _, part := range []struct {
		path      *field.Path
		value     any
		what, fix string
	}{
		{field.NewPath("spec", "trainer", "env"), trainerEnv(tj), "the job's environment, copied into the launcher's and the workers' pod templates",
			"keep large values in a ConfigMap or Secret and reference them (valueFrom, or envFrom in a runtime patch)"},
		{field.NewPath("spec", "trainer", "command"), trainerCommand(tj), "the job's command and arguments, copied into the launcher's and the workers' pod templates",
			"put the program in the image or a volume and run it by path"},
		{field.NewPath("spec", "runtimePatches"), tj.Spec.RuntimePatches, "the job's runtime patches", "patch less, or move what they add into the runtime"},
	} {
		b, _ := json.Marshal(part.value)
		if len(b) > largest && len(b) > maxJobSetBytes/8 {
			largest, path, what, fix = len(b), part.path, fmt.Sprintf("%s (%s)", part.what, kib(len(b))), part.fix
		}
	}
	// Forbidden, not Invalid: the message must not repeat a value of
	// hundreds of KiB.
	return field.ErrorList{field.Forbidden(path,
		fmt.Sprintf("the job's JobSet would be %s, over the %s Torus stores for one (etcd refuses larger writes): most of it is %s; %s",
			kib(len(raw)), kib(maxJobSetBytes), what, fix))}
}

func trainerEnv(tj *trainer.TrainJob) any {
	if tj.Spec.Trainer == nil {
		return nil
	}
	return tj.Spec.Trainer.Env
}

func trainerCommand(tj *trainer.TrainJob) any {
	if tj.Spec.Trainer == nil {
		return nil
	}
	return [][]string{tj.Spec.Trainer.Command, tj.Spec.Trainer.Args}
}

func kib(n int) string {
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}
