// Command torus-ssh is the ssh MPI launchers run to start their daemons on
// a job's workers, which serve it with torus-launch-agent. Its own options
// come first, each as --name=value:
//
//	torus-ssh [--key=FILE] [--known-host-key=FILE] [--port=N] [ssh options] host command...
//
// Options not given are read from TORUS_SSH_KEY, TORUS_SSH_KNOWN_HOST_KEY
// and TORUS_SSH_PORT, for launchers that take a program's path alone.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/torus-mpi/torus/pkg/launchagent"
)

func main() {
	opts := map[string]string{
		"key":            os.Getenv(launchagent.EnvKey),
		"known-host-key": os.Getenv(launchagent.EnvKnownHostKey),
		"port":           os.Getenv(launchagent.EnvPort),
	}
	args := os.Args[1:]
	// ssh's own options are single letters: a word starting with "--" and
	// holding "=" is one of ours.
	for len(args) > 0 && strings.HasPrefix(args[0], "--") && strings.Contains(args[0], "=") {
		name, value, _ := strings.Cut(args[0][2:], "=")
		if _, ok := opts[name]; !ok {
			fail(fmt.Errorf("unknown option --%s", name))
		}
		opts[name] = value
		args = args[1:]
	}
	c, err := launchagent.NewClient(opts["key"], opts["known-host-key"])
	if err != nil {
		fail(err)
	}
	if p := opts["port"]; p != "" {
		if c.Port, err = strconv.Atoi(p); err != nil {
			fail(fmt.Errorf("bad port %q", p))
		}
	}
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	c.Signals = sigs
	os.Exit(c.Run(args))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "torus-ssh:", err)
	os.Exit(launchagent.ExitFailure)
}
