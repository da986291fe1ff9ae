package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The test binary doubles as the supervised process: with
// SUPERVISOR_TEST_CHILD set it runs as one (see child).
func TestMain(m *testing.M) {
	if mode := os.Getenv("SUPERVISOR_TEST_CHILD"); mode != "" {
		child(mode, os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

// child listens on every port in args and serves until killed ("serve"),
// or says something and exits 3 ("crash"), or runs without listening
// ("idle").
func child(mode string, args []string) {
	switch mode {
	case "crash":
		fmt.Println("starting")
		fmt.Println("fatal: the configuration names no cluster")
		os.Exit(3)
	case "idle":
		untilKilled()
	}
	var ls []net.Listener
	for _, a := range args {
		l, err := net.Listen("tcp", "127.0.0.1:"+a)
		if err != nil {
			fmt.Println("serving:", err)
			os.Exit(1)
		}
		ls = append(ls, l)
	}
	fmt.Println("serving on", args)
	untilKilled()
}

// untilKilled blocks until a signal ends the process. Not select {}:
// without cgo the runtime sees every goroutine asleep and exits with
// "deadlock!".
func untilKilled() {
	for {
		time.Sleep(time.Hour)
	}
}

func childSpec(mode string, ports []int) Spec {
	argv := []string{os.Args[0]}
	for _, p := range ports {
		argv = append(argv, strconv.Itoa(p))
	}
	return Spec{Argv: argv, Env: []string{"SUPERVISOR_TEST_CHILD=" + mode}}
}

func TestNonEphemeralRange(t *testing.T) {
	cases := map[string]struct {
		in             string
		wantLo, wantHi int
		wantErr        bool
	}{
		"linux default: below":          {in: "32768\t60999\n", wantLo: 24768, wantHi: 32768},
		"low ephemeral range: above":    {in: "1024 50000", wantLo: 50001, wantHi: 58001},
		"whole range ephemeral: error":  {in: "1024 65535", wantErr: true},
		"malformed":                     {in: "32768", wantErr: true},
		"not numbers":                   {in: "a b", wantErr: true},
		"just enough room below":        {in: "9024 60999", wantLo: 1024, wantHi: 9024},
		"one port too few below, above": {in: "9023 57535", wantLo: 57536, wantHi: 65536},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lo, hi, err := nonEphemeralRange(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff([2]int{tc.wantLo, tc.wantHi}, [2]int{lo, hi}); !tc.wantErr && diff != "" {
				t.Errorf("range (-want,+got):\n%s", diff)
			}
		})
	}
}

// testRange returns a window of n consecutive ports outside the ephemeral
// range that are free now, where this test binary is the only one to bind.
func testRange(t *testing.T, n int) (int, int) {
	t.Helper()
	p, err := NewPorts()
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := p.Range()
	start, err := p.Take()
	if err != nil {
		t.Fatal(err)
	}
	for first := start; first+n <= hi; first++ {
		if allFree(first, n) {
			return first, first + n
		}
	}
	for first := lo; first+n <= start; first++ {
		if allFree(first, n) {
			return first, first + n
		}
	}
	t.Skipf("no %d consecutive free ports in %d-%d", n, lo, hi-1)
	return 0, 0
}

func allFree(first, n int) bool {
	for port := first; port < first+n; port++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

func TestPortsOutsideEphemeralRangeAndNeverTwice(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range")
	}
	f := strings.Fields(string(data))
	eLo, _ := strconv.Atoi(f[0])
	eHi, _ := strconv.Atoi(f[1])
	p, err := NewPorts()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	ports, err := p.TakeN(500)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range ports {
		if port >= eLo && port <= eHi {
			t.Errorf("port %d is in the ephemeral range %d-%d", port, eLo, eHi)
		}
		if seen[port] {
			t.Errorf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}

func TestPortsSkipPortsInUse(t *testing.T) {
	lo, hi := testRange(t, 3)
	p := NewPortsInRange(lo, hi)
	p.next = lo
	busy, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lo+1))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	got, err := p.TakeN(2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{lo, lo + 2}, got); diff != "" {
		t.Errorf("ports (-want,+got):\n%s", diff)
	}
	if _, err := p.Take(); err == nil {
		t.Error("Take succeeded with every port of the range handed out or in use")
	}
}

func serving(_ context.Context, ports []int) error {
	for _, port := range ports {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}

func TestRunRestartsOnOtherPortsWhenABindFails(t *testing.T) {
	lo, hi := testRange(t, 8)
	dir := t.TempDir()
	var restarts []string
	s := &Supervisor{Ports: NewPortsInRange(lo, hi), LogDir: dir, Logf: func(f string, a ...any) { restarts = append(restarts, fmt.Sprintf(f, a...)) }}
	var thief net.Listener
	defer func() {
		if thief != nil {
			thief.Close()
		}
	}()
	calls := 0
	p, ports, err := s.Run(context.Background(), Component{
		Name:  "server",
		Ports: 2,
		Command: func(_ context.Context, ports []int) (Spec, error) {
			calls++
			if calls == 1 {
				// Someone else binds the second port between its choice
				// and the component's start, as a busy machine's other processes can.
				var err error
				if thief, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[1])); err != nil {
					return Spec{}, err
				}
			}
			return childSpec("serve", ports), nil
		},
		Ready: serving,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	defer p.Stop()
	if calls != 2 || len(restarts) != 1 {
		t.Errorf("started %d times with restarts %q, want 2 starts and one restart", calls, restarts)
	}
	if thief != nil && (ports[0] == thief.Addr().(*net.TCPAddr).Port || ports[1] == thief.Addr().(*net.TCPAddr).Port) {
		t.Errorf("restarted on the stolen port: %v", ports)
	}
	first, err := os.ReadFile(filepath.Join(dir, "server.attempt-1.log"))
	if err != nil || !strings.Contains(string(first), bindFailure) {
		t.Errorf("first attempt's log = %q (%v), want it kept with %q", first, err, bindFailure)
	}
	addrs, err := Listeners(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	if missing := missingPorts(addrs, ports); len(missing) > 0 {
		t.Errorf("listeners %v lack %v", addrs, missing)
	}
	p.Stop()
	if !p.Exited() || Alive(p.PID()) {
		t.Error("process still alive after Stop")
	}
}

func TestRunNamesAComponentThatExitsAndShowsItsLog(t *testing.T) {
	lo, hi := testRange(t, 4)
	s := &Supervisor{Ports: NewPortsInRange(lo, hi), LogDir: t.TempDir()}
	_, _, err := s.Run(context.Background(), Component{
		Name:    "torus-operator",
		Ports:   1,
		Command: func(_ context.Context, ports []int) (Spec, error) { return childSpec("crash", ports), nil },
		Ready:   serving,
	})
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("Run error = %v, want a StartError", err)
	}
	for _, want := range []string{"torus-operator exited during start-up (exit status 3)", "fatal: the configuration names no cluster", "starting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestRunWantsEveryGivenPortListenedOn(t *testing.T) {
	lo, hi := testRange(t, 4)
	s := &Supervisor{Ports: NewPortsInRange(lo, hi), LogDir: t.TempDir()}
	start := time.Now()
	_, _, err := s.Run(context.Background(), Component{
		Name:    "kueue",
		Ports:   1,
		Command: func(_ context.Context, ports []int) (Spec, error) { return childSpec("idle", ports), nil },
		// Ready passes, as a health endpoint on another port would.
		Ready:   func(context.Context, []int) error { return nil },
		Timeout: time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "not listening on port(s)") {
		t.Fatalf("Run error = %v, want one about the port not listened on", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("Run took %s to give up", time.Since(start))
	}
}

func TestTail(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		content string
		n       int
		want    string
	}{
		"last lines":    {content: "a\nb\nc\n", n: 2, want: "  b\n  c"},
		"fewer than n":  {content: "a\n", n: 5, want: "  a"},
		"empty":         {content: "", n: 5, want: "  (the log is empty)"},
		"no final \\n":  {content: "a\nb", n: 1, want: "  b"},
		"whole of many": {content: "1\n2\n3\n4\n", n: 4, want: "  1\n  2\n  3\n  4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, Tail(f, tc.n)); diff != "" {
				t.Errorf("Tail (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRunLetsOptionalPortsStayUnbound(t *testing.T) {
	lo, hi := testRange(t, 4)
	s := &Supervisor{Ports: NewPortsInRange(lo, hi), LogDir: t.TempDir()}
	p, ports, err := s.Run(context.Background(), Component{
		Name: "upstream", Ports: 2, Optional: 1,
		// Serves on the first port only, as a server behind a feature
		// gate leaves the second unbound.
		Command: func(_ context.Context, ports []int) (Spec, error) { return childSpec("serve", ports[:1]), nil },
		Ready:   func(ctx context.Context, ports []int) error { return serving(ctx, ports[:1]) },
		Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	defer p.Stop()
	if len(ports) != 2 {
		t.Errorf("ports = %v, want two", ports)
	}
}
