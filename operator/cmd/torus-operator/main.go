// Command torus-operator reconciles MPI TrainJobs into JobSets.
package main

import (
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/torus-mpi/torus/operator/app"
)

func main() {
	var o app.Options
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	if err := app.Run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "Operator stopped")
		os.Exit(1)
	}
}
