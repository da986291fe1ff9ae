package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/cmdutil"
	"github.com/torus-mpi/torus/plugin/top"
)

const dashboardExample = `  # Serve the dashboard on a free loopback port and open it in a browser
  kubectl mpi dashboard

  # A fixed port, no browser (open the printed URL yourself)
  kubectl mpi dashboard --port 8443 --open=false`

type options struct {
	getter plugclient.Getter
	genericiooptions.IOStreams

	Address string
	Port    int
	Open    bool

	srv *server
	// ready, when set, receives the URL once the server listens (tests).
	ready func(url string)
}

// NewCmd returns kubectl mpi dashboard.
func NewCmd(getter plugclient.Getter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{getter: getter, IOStreams: streams, Address: "127.0.0.1", Open: true}
	cmd := &cobra.Command{
		Use:   "dashboard [--port PORT] [--open=false]",
		Short: "Serve a web dashboard of your MPI jobs on localhost, with your identity",
		Long: `Serve a web dashboard of your jobs on localhost: every job with its state and ranks, live; a job's
hosts, the failing rank with its cause and fix, its conditions, events and logs; a form to create a job,
checked as you type by run's rules and the API server; clone, modify and delete.

The dashboard acts with your kubeconfig's identity: it shows and does what your RBAC allows, and
nothing is installed in the cluster. It listens on loopback only, and its URL holds a token for
this run: share neither.`,
		Example: dashboardExample,
		Args:    cmdutil.ExactArgs(0, "no arguments"),
		RunE:    cmdutil.RunE(o),
	}
	cmd.Flags().StringVar(&o.Address, "address", o.Address, "The loopback address to listen on (127.0.0.1 or ::1)")
	cmd.Flags().IntVar(&o.Port, "port", 0, "The port to listen on; 0 picks a free one")
	cmd.Flags().BoolVar(&o.Open, "open", o.Open, "Open the dashboard in the desktop's browser")
	return cmd
}

// Complete reads the namespace and the clients.
func (o *options) Complete(_ *cobra.Command, _ []string) error {
	var err error
	o.srv, err = newServer(o.getter)
	return err
}

// newServer answers the page with the getter's user's clients, in its
// namespace.
func newServer(getter plugclient.Getter) (*server, error) {
	ns, err := getter.Namespace()
	if err != nil {
		return nil, err
	}
	c, kube, err := plugclient.Clients(getter)
	if err != nil {
		return nil, err
	}
	cfg, err := getter.RESTConfig()
	if err != nil {
		return nil, err
	}
	metrics, err := top.NewMetricsClient(cfg)
	if err != nil {
		return nil, err
	}
	return &server{client: c, kube: kube, usage: top.NewReader(cfg, kube, metrics), pods: newJobPods(kube), namespace: ns, clock: clock.RealClock{}}, nil
}

// Handler is the dashboard as kubectl mpi dashboard serves it at addr: its
// page and API, with the getter's user's clients, behind the guard that
// admits only requests to addr bearing token, and writes only from the
// page's own origin.
func Handler(getter plugclient.Getter, token string, addr net.Addr) (http.Handler, error) {
	srv, err := newServer(getter)
	if err != nil {
		return nil, err
	}
	return newGuard(token, addr, srv.routes()), nil
}

// Validate keeps the server on loopback: its token is all that guards the
// user's identity, and it travels in the clear.
func (o *options) Validate() error {
	ip := net.ParseIP(o.Address)
	if ip == nil || !ip.IsLoopback() {
		return cmdutil.UsageError("--address %q: the dashboard listens on a loopback address only (127.0.0.1 or ::1): it acts as you, and its token travels unencrypted", o.Address)
	}
	if o.Port < 0 || o.Port > 65535 {
		return cmdutil.UsageError("--port %d: use 1 to 65535, or 0 for a free port", o.Port)
	}
	return nil
}

// Run serves until interrupted.
func (o *options) Run(ctx context.Context) error {
	l, err := net.Listen("tcp", net.JoinHostPort(o.Address, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listening on %s port %d: %w (choose another with --port)", o.Address, o.Port, err)
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           newGuard(token, l.Addr(), o.srv.routes()),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	url := fmt.Sprintf("http://%s/?token=%s", l.Addr(), token)
	fmt.Fprintf(o.Out, "Serving the Torus dashboard for namespace %s at\n\n    %s\n\nPress Ctrl-C to stop.\n", o.srv.namespace, url)
	if o.ready != nil {
		o.ready(url)
	}
	if o.Open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(o.ErrOut, "Could not open a browser (%v): open the URL above.\n", err)
		}
	}
	defer cleanupLauncher()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// newToken is this run's secret: 128 random bits.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the dashboard's token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// launcherFile is the page openBrowser hands the browser, removed when
// the dashboard stops.
var launcherFile string

func cleanupLauncher() {
	if launcherFile != "" {
		_ = os.Remove(launcherFile)
	}
}

// openBrowser asks the desktop to open url, where there is one. The URL
// holds the token, and a command line is readable by every user of the
// machine (/proc/PID/cmdline): the browser is given instead a file only
// this user can read, which sends it on to url.
func openBrowser(url string) error {
	f, err := os.CreateTemp("", "torus-dashboard-*.html")
	if err != nil {
		return err
	}
	launcherFile = f.Name()
	page := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + html.EscapeString(url) + `"><title>Torus</title>` +
		`<p>Opening the Torus dashboard: <a href="` + html.EscapeString(url) + `">continue</a>.</p>`
	if _, err := f.WriteString(page); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", launcherFile)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", launcherFile)
	default:
		cmd = exec.Command("xdg-open", launcherFile)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
