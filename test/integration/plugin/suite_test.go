// Package plugin_test runs kubectl mpi's commands in-process against a real
// API server with the Trainer, JobSet and Kueue CRDs, Torus's webhooks and
// its controllers (envtest): what the API side decides (schema, webhooks,
// the operator's conditions) as the commands show it. Pods, logs and exec
// need the local cluster: test/e2e/plugin_*_test.go.
package plugin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/plugin/app"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	fw  = framework.Suite(controller.Options{}, framework.SampleRuntimes, framework.AdminKubeconfig)
	ctx = context.Background()
)

func TestPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl mpi integration")
}

type result struct {
	Stdout, Stderr string
	Code           int
	Err            error
}

// kubectlMPI runs kubectl mpi in-process, as a user's shell would.
func kubectlMPI(stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &fw.Kubeconfig
	cmd := app.NewCmd(flags, genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	r := result{Stdout: out.String(), Stderr: errOut.String(), Code: cmdutil.Code(err), Err: err}
	GinkgoWriter.Printf("$ kubectl mpi %s\n%s%s(exit %d: %v)\n", strings.Join(args, " "), r.Stdout, r.Stderr, r.Code, err)
	return r
}
