package printers

import (
	"io"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/cli-runtime/pkg/printers"
)

// PrintName prints "trainjob.trainer.kubeflow.org/NAME OPERATION", as
// kubectl delete and wait do, with cli-runtime's NamePrinter.
func PrintName(w io.Writer, tj *trainer.TrainJob, operation string) error {
	obj := tj.DeepCopy()
	obj.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	return (&printers.NamePrinter{Operation: operation}).PrintObj(obj, w)
}
