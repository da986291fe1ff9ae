package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// An MPI world cannot go on without one of its hosts, and it loses one in
// two ways: the program fails (a rank exits non-zero, runs out of memory),
// or something outside the program stops the host (its pod deleted,
// evicted or preempted, its node lost). The job is restarted either way,
// but only the program's failures spend its restart budget. The pods say
// which it was by their exit code, which the job's pod failure policy
// reads: cmdline.ExitWorldLost for the second.
//
//   - An agent whose Shutdown stopped commands that were running exits
//     cmdline.ExitWorldLost; one stopped idle, as every worker is once its
//     launcher has finished, exits 0.
//   - The agent ends each command it stopped with StoppedMessage, and the
//     client notes the host in the directory EnvLostHosts names, as it
//     does a host whose connection was lost before its command ended.
//   - The launcher's supervisor (torus-launch wait) exits
//     cmdline.ExitWorldLost when its command failed after a host was
//     noted, or after the launcher itself was asked to stop.
const (
	// StoppedMessage is the exit-signal message of a command the agent's
	// Shutdown stopped.
	StoppedMessage = "torus-launch: the host is stopping"
	// EnvLostHosts names the directory where clients note the hosts lost.
	EnvLostHosts = "TORUS_LAUNCH_LOST_HOSTS"
)

// noteLost records host as lost, and why, in dir. A note that cannot be
// written only costs the job a restart counted against its budget.
func noteLost(dir, host, why string) {
	if dir == "" {
		return
	}
	name := strings.ReplaceAll(host, string(filepath.Separator), "_")
	if name == "" || name == "." || name == ".." {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, name), []byte(why+"\n"), 0o600)
}

// LostHosts reads the notes of the hosts lost in dir, one "host: why"
// each, in host order.
func LostHosts(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the lost hosts' notes: %w", err)
	}
	var out []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		out = append(out, e.Name()+": "+strings.TrimSpace(string(data)))
	}
	sort.Strings(out)
	return out, nil
}
