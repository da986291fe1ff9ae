// Command torus-launch-agent serves a job's remote launches in its worker
// pods in place of sshd: MPI launchers reach it with torus-ssh (or ssh)
// and the job's client key, and it runs their daemons as its own user.
package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/torus-mpi/torus/pkg/launchagent"
)

func main() {
	// 2222 is the port of the job's sshd by default.
	listen := pflag.String("listen", ":2222", "address to listen on")
	hostKey := pflag.String("host-key", "", "the job's host key (PEM private key file)")
	authorizedKeys := pflag.String("authorized-keys", "", "the job's client public key (authorized_keys file)")
	grace := pflag.Duration("kill-grace", launchagent.DefaultKillGrace, "time between SIGTERM and SIGKILL for a command whose client has gone")
	pflag.Parse()
	log.SetPrefix("torus-launch-agent: ")
	if err := run(*listen, *hostKey, *authorizedKeys, *grace); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(listen, hostKeyFile, authorizedKeysFile string, grace time.Duration) error {
	hostKey, err := os.ReadFile(hostKeyFile)
	if err != nil {
		return fmt.Errorf("reading the host key: %w", err)
	}
	authorized, err := os.ReadFile(authorizedKeysFile)
	if err != nil {
		return fmt.Errorf("reading the authorized keys: %w", err)
	}
	s, err := launchagent.NewServer(hostKey, authorized)
	if err != nil {
		return err
	}
	s.KillGrace = grace
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	log.Printf("listening on %s", l.Addr())
	return s.Serve(l)
}
