// Command kubectl-mpi is the kubectl (and oc) plugin for MPI jobs.
package main

import (
	"fmt"
	"os"

	// Every client-go authentication plugin (OIDC, exec), as kubectl has.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"github.com/torus-mpi/torus/plugin/app"
	"github.com/torus-mpi/torus/plugin/cmdutil"
)

func main() {
	err := app.NewDefaultCmd().Execute()
	if err != nil && !cmdutil.Silent(err) {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(cmdutil.Code(err))
}
