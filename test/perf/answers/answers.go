// Package answers times what a user asks of a running job, the plugin's
// commands and the dashboard's view of the job, for the benchmarks that
// report how soon they answer at a size.
package answers

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/dashboard"
)

// Answer is how long one of the plugin's commands, or the dashboard's job
// view, took to answer: the median of its tries.
type Answer struct {
	What   string
	Median time.Duration
	// Err is why it did not answer; Median is then zero.
	Err string
}

// Tries runs f three times and keeps the median.
func Tries(what string, f func() error) Answer {
	var d []time.Duration
	for range 3 {
		start := time.Now()
		if err := f(); err != nil {
			return Answer{What: what, Err: err.Error()}
		}
		d = append(d, time.Since(start))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return Answer{What: what, Median: d[1]}
}

// Plugin is one run of the plugin binary with args, against kubeconfig.
func Plugin(ctx context.Context, plugin, kubeconfig string, args ...string) func() error {
	return func() error {
		run := exec.CommandContext(ctx, plugin, args...)
		run.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if b, err := run.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, LastLine(b))
		}
		return nil
	}
}

// DashboardView serves the dashboard as kubectl mpi dashboard does, on
// loopback, and returns a read of the job's view (what its page shows
// when it opens).
func DashboardView(kubeconfig, ns, name string) (view func() error, stop func(), err error) {
	const token = "0123456789abcdef0123456789abcdef"
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	h, err := dashboard.Handler(plugclient.New(flags), token, l.Addr())
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	web := &http.Client{Timeout: time.Minute}
	view = func() error {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/namespaces/"+ns+"/jobs/"+name, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := web.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, LastLine(body))
		}
		return nil
	}
	return view, srv.Close, nil
}

// LastLine is the last non-empty line of a command's output.
func LastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
