// Command kubectl-mpi is the kubectl (and oc) plugin for MPI jobs.
package main

import (
	"fmt"
	"os"

	"github.com/torus-mpi/torus/plugin/app"
)

func main() {
	if err := app.NewDefaultCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
