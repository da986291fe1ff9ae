// Package cmdline is torus-launch's command line: the arguments of its
// setup, wait and agent commands, the environment the operator gives its
// client and the exit code by which its containers say a job lost a host. The operator
// renders these into a job's pods (pkg/mpi) and the binary parses them
// (launch/cmd/torus-launch); each command is one type both use, so the two
// cannot drift apart. The package holds no behaviour: launch/agent does
// what the commands ask.
package cmdline

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Binary is the launch agent's binary; ClientName, the name under which
// the same binary is the ssh MPI launchers run.
const (
	Binary     = "torus-launch"
	ClientName = "torus-ssh"
)

// The client's settings: launchers such as Hydra take a program's path
// alone, and daemons launching daemons in a tree inherit them from the
// agent.
const (
	EnvKey        = "TORUS_SSH_KEY"
	EnvKnownHosts = "TORUS_SSH_KNOWN_HOSTS"
	EnvPort       = "TORUS_SSH_PORT"
)

// Waiting begins each line by which the launcher's wait says which host it
// still waits for, quoting that host's latest answer: progress, though the
// answer reads like a failure (connection refused while the worker starts).
const Waiting = "torus: waiting for "

// ExitWorldLost is the exit code by which a container running torus-launch
// says its job's MPI world lost a host to something other than the program
// (sysexits' EX_TEMPFAIL): a worker's agent stopped while it ran the job's
// commands, or a launcher whose command failed after a host was lost, or
// that was itself stopped. The job's pod failure policy fails its Job on
// it, and the JobSet restarts the job without spending its restart budget.
const ExitWorldLost = 75

// Command is one of torus-launch's commands: Setup, WaitThenRun or Agent.
type Command interface {
	// Args is the command line: the command's name, its flags, and the
	// command it runs in its place after "--", if any.
	Args() []string
}

// Parse reads a command line of torus-launch, the words after the
// binary's name, into its Command. The binary's ssh command takes ssh's own
// command line, which launchers build (launch/agent.ParseArgs).
func Parse(args []string) (Command, error) {
	if len(args) == 0 {
		return nil, errors.New("no command given: use setup, wait, agent or ssh")
	}
	name, rest := args[0], args[1:]
	var (
		c   Command
		err error
	)
	switch name {
	case setupName:
		c, err = parseSetup(rest)
	case waitName:
		c, err = parseWait(rest)
	case agentName:
		c, err = parseAgent(rest)
	default:
		return nil, fmt.Errorf("unknown command %q: use setup, wait, agent or ssh", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

const (
	setupName = "setup"
	waitName  = "wait"
	agentName = "agent"
)

// File is a file of the job's SSH Secret that setup puts in the SSH
// directory.
type File struct {
	// Key is the Secret's key; Name, the file's name in the SSH directory.
	Key, Name string
	Mode      os.FileMode
	// Keyed files come in two generations: a pod of a later run than the
	// Secret's current keys are for takes the next ones.
	Keyed bool
}

// Setup is torus-launch setup: first in every pod of an agent job, it puts
// the run's keys in the SSH directory, installs the binary for the other
// containers and, on the launcher, may wait for the workers. With a
// Command it then runs that in its own place.
type Setup struct {
	// SecretDir is where the job's SSH Secret is mounted; Dir, the SSH
	// directory to fill.
	SecretDir, Dir string
	// RunKey is the Secret's key holding the run its current keys are for;
	// NextPrefix prefixes the keys of the run after it.
	RunKey, NextPrefix string
	// Run is the pod's run, the JobSet's restart attempt: a number, or a
	// $(VAR) reference the kubelet expands into one; empty is run 0.
	Run string
	// Link links each file to the Secret's rather than copying it: the
	// pod's other containers mount the Secret too, and may run as another
	// user than this one.
	Link bool
	// Files are put in Dir, in this order.
	Files []File
	// InstallDir, if set, receives the binary and its client name.
	InstallDir string
	// Wait, if set, holds the setup's end until every worker answers.
	Wait *Wait
	// Command, if set, runs in the setup's place once it is done: a
	// container whose image holds the binary sets itself up.
	Command []string
}

// Wait is the launcher's wait for the hosts of its hostfile, which ends
// when each answers on Port as the job's host.
type Wait struct {
	Hostfile string
	// CallBack, if set, is a name that must resolve too: the launcher's own.
	CallBack string
	Port     int
	// Key and KnownHosts are file names in the SSH directory.
	Key, KnownHosts string
	// HostKeyOnly ends a host's wait at the job's host key, without
	// logging in (OpenSSH's sshd).
	HostKeyOnly bool
	// ReadyFile, if set, is empty until every worker is Ready: the wait is
	// unbounded until then. Timeout bounds it from then, or from its start.
	ReadyFile string
	Timeout   time.Duration
}

// WaitThenRun is torus-launch wait: the launcher's wait for its workers in
// its own container, then Command in its place, supervised.
type WaitThenRun struct {
	// Dir is the SSH directory holding the client key and known hosts.
	Dir  string
	Wait Wait
	// Quiet keeps the wait's reasons to itself until it has lasted this long.
	Quiet   time.Duration
	Command []string
}

// Agent is torus-launch agent, a worker's server of remote commands.
type Agent struct {
	// Listen is the address to listen on, such as ":2222".
	Listen string
	// HostKey is the job's host key (a PEM private key file);
	// AuthorizedKeys, the job's client public key (an authorized_keys file).
	HostKey, AuthorizedKeys string
	// KillGrace is the time between SIGTERM and SIGKILL for a command whose
	// client has gone; zero is the agent's default.
	KillGrace time.Duration
}

// The flags' names, which Args renders and Parse binds.
const (
	flagSecret      = "secret"
	flagDir         = "dir"
	flagRunKey      = "run-key"
	flagNextPrefix  = "next-prefix"
	flagRun         = "run"
	flagLink        = "link"
	flagFile        = "file"
	flagKeyedFile   = "keyed-file"
	flagInstall     = "install"
	flagHostfile    = "wait-hostfile"
	flagCallBack    = "wait-callback"
	flagPort        = "wait-port"
	flagKey         = "wait-key"
	flagKnownHosts  = "wait-known-hosts"
	flagHostKeyOnly = "wait-host-key-only"
	flagReadyFile   = "workers-ready"
	flagTimeout     = "ready-timeout"
	flagQuiet       = "quiet-for"
	flagListen      = "listen"
	flagHostKey     = "host-key"
	flagAuthorized  = "authorized-keys"
	flagKillGrace   = "kill-grace"
)

// Args renders the setup's command line.
func (s Setup) Args() []string {
	a := argv{setupName}
	a.str(flagSecret, s.SecretDir)
	a.str(flagDir, s.Dir)
	a.str(flagRunKey, s.RunKey)
	a.str(flagNextPrefix, s.NextPrefix)
	a.str(flagRun, s.Run)
	a.flag(flagLink, s.Link)
	a.str(flagInstall, s.InstallDir)
	for _, f := range s.Files {
		name := flagFile
		if f.Keyed {
			name = flagKeyedFile
		}
		a.str(name, f.spec())
	}
	if s.Wait != nil {
		s.Wait.render(&a)
	}
	return a.then(s.Command)
}

// Args renders the wait's command line.
func (w WaitThenRun) Args() []string {
	a := argv{waitName}
	a.str(flagDir, w.Dir)
	a.duration(flagQuiet, w.Quiet)
	w.Wait.render(&a)
	return a.then(w.Command)
}

// Args renders the agent's command line.
func (g Agent) Args() []string {
	a := argv{agentName}
	a.str(flagListen, g.Listen)
	a.str(flagHostKey, g.HostKey)
	a.str(flagAuthorized, g.AuthorizedKeys)
	a.duration(flagKillGrace, g.KillGrace)
	return a
}

func (w Wait) render(a *argv) {
	a.str(flagHostfile, w.Hostfile)
	if w.Port != 0 {
		a.str(flagPort, strconv.Itoa(w.Port))
	}
	a.str(flagKey, w.Key)
	a.str(flagKnownHosts, w.KnownHosts)
	a.duration(flagTimeout, w.Timeout)
	a.str(flagReadyFile, w.ReadyFile)
	a.str(flagCallBack, w.CallBack)
	a.flag(flagHostKeyOnly, w.HostKeyOnly)
}

func parseSetup(args []string) (Setup, error) {
	fs := newFlagSet(setupName)
	var s Setup
	fs.StringVar(&s.SecretDir, flagSecret, "", "where the job's SSH Secret is mounted")
	fs.StringVar(&s.Dir, flagDir, "", "the SSH directory to fill")
	fs.StringVar(&s.RunKey, flagRunKey, "", "the Secret's key holding the run its current keys are for")
	fs.StringVar(&s.NextPrefix, flagNextPrefix, "", "the prefix of the next run's keys")
	fs.StringVar(&s.Run, flagRun, "", "this pod's run (the JobSet's restart attempt; empty is 0)")
	fs.BoolVar(&s.Link, flagLink, false, "link the files to the Secret's rather than copy them (other containers mount the Secret too)")
	fs.Var(&fileList{files: &s.Files}, flagFile, "KEY:NAME:MODE, a file to copy from the Secret")
	fs.Var(&fileList{files: &s.Files, keyed: true}, flagKeyedFile, "KEY:NAME:MODE, a file to copy from the Secret in this run's generation")
	fs.StringVar(&s.InstallDir, flagInstall, "", "a directory to install this binary into")
	var w Wait
	w.bind(fs)
	if err := fs.Parse(args); err != nil {
		return Setup{}, err
	}
	if s.SecretDir == "" || s.Dir == "" || s.RunKey == "" || s.NextPrefix == "" {
		return Setup{}, errors.New("--secret, --dir, --run-key and --next-prefix are needed")
	}
	if s.Run != "" {
		if _, err := strconv.Atoi(s.Run); err != nil {
			return Setup{}, fmt.Errorf("--run=%q: want a number", s.Run)
		}
	}
	if w != (Wait{}) {
		if err := w.validate(); err != nil {
			return Setup{}, err
		}
		s.Wait = &w
	}
	s.Command = command(fs)
	return s, nil
}

func parseWait(args []string) (WaitThenRun, error) {
	fs := newFlagSet(waitName)
	var w WaitThenRun
	fs.StringVar(&w.Dir, flagDir, "", "the SSH directory holding the client key and known hosts")
	fs.DurationVar(&w.Quiet, flagQuiet, 0, "say nothing of what the wait waits for until it has lasted this long")
	w.Wait.bind(fs)
	if err := fs.Parse(args); err != nil {
		return WaitThenRun{}, err
	}
	w.Command = command(fs)
	if w.Dir == "" || len(w.Command) == 0 {
		return WaitThenRun{}, errors.New("usage: wait --dir=DIR --wait-hostfile=FILE [flags] -- command [args...]")
	}
	if err := w.Wait.validate(); err != nil {
		return WaitThenRun{}, err
	}
	return w, nil
}

func parseAgent(args []string) (Agent, error) {
	fs := newFlagSet(agentName)
	var g Agent
	fs.StringVar(&g.Listen, flagListen, "", "address to listen on, such as :2222")
	fs.StringVar(&g.HostKey, flagHostKey, "", "the job's host key (PEM private key file)")
	fs.StringVar(&g.AuthorizedKeys, flagAuthorized, "", "the job's client public key (authorized_keys file)")
	fs.DurationVar(&g.KillGrace, flagKillGrace, 0, "time between SIGTERM and SIGKILL for a command whose client has gone (0: the agent's default)")
	if err := fs.Parse(args); err != nil {
		return Agent{}, err
	}
	if g.Listen == "" || g.HostKey == "" || g.AuthorizedKeys == "" {
		return Agent{}, errors.New("--listen, --host-key and --authorized-keys are needed")
	}
	if fs.NArg() > 0 {
		return Agent{}, fmt.Errorf("the agent runs no command; got %q", fs.Args())
	}
	return g, nil
}

func (w *Wait) bind(fs *pflag.FlagSet) {
	fs.StringVar(&w.Hostfile, flagHostfile, "", "on the launcher: wait for the hosts of this hostfile")
	fs.StringVar(&w.CallBack, flagCallBack, "", "a name to wait for besides, the launcher's own")
	fs.IntVar(&w.Port, flagPort, 0, "the port the hosts' agents listen on")
	fs.StringVar(&w.Key, flagKey, "", "the client key's name in the SSH directory")
	fs.StringVar(&w.KnownHosts, flagKnownHosts, "", "the known hosts' name in the SSH directory")
	fs.BoolVar(&w.HostKeyOnly, flagHostKeyOnly, false, "end a host's wait at the job's host key, without logging in (OpenSSH's sshd)")
	fs.StringVar(&w.ReadyFile, flagReadyFile, "", "a file that is empty until every worker is Ready: the wait is unbounded until then")
	fs.DurationVar(&w.Timeout, flagTimeout, 0, "how long to wait for the hosts once every worker is Ready (or from the start, without --workers-ready)")
}

func (w Wait) validate() error {
	switch {
	case w.Hostfile == "":
		return errors.New("the wait needs --" + flagHostfile)
	case w.Port < 1 || w.Port > 65535:
		return fmt.Errorf("--%s=%d: want a port, 1 to 65535", flagPort, w.Port)
	case w.KnownHosts == "":
		return errors.New("the wait needs --" + flagKnownHosts)
	case w.Key == "" && !w.HostKeyOnly:
		return fmt.Errorf("the wait needs --%s, or --%s", flagKey, flagHostKeyOnly)
	case w.Timeout <= 0:
		return fmt.Errorf("the wait needs a positive --%s", flagTimeout)
	}
	return nil
}

// newFlagSet reads flags up to the first word that is not one, or "--":
// what follows is the command, whose own flags are not the setup's.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetInterspersed(false)
	return fs
}

func command(fs *pflag.FlagSet) []string {
	if fs.NArg() == 0 {
		return nil
	}
	return fs.Args()
}

// spec is a file's flag value, KEY:NAME:MODE with the mode in octal; a
// mode beyond the permission bits is rendered as it is, and Parse refuses it.
func (f File) spec() string {
	return fmt.Sprintf("%s:%s:%04o", f.Key, f.Name, uint32(f.Mode))
}

// fileList collects --file and --keyed-file into one list, in the order
// they come.
type fileList struct {
	files *[]File
	keyed bool
}

func (l *fileList) Set(spec string) error {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("%q: want KEY:NAME:MODE", spec)
	}
	mode, err := strconv.ParseUint(parts[2], 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("%q: mode %q is not an octal permission", spec, parts[2])
	}
	*l.files = append(*l.files, File{Key: parts[0], Name: parts[1], Mode: os.FileMode(mode), Keyed: l.keyed})
	return nil
}

func (l *fileList) String() string { return "" }
func (l *fileList) Type() string   { return "KEY:NAME:MODE" }

// argv renders a command line, one --name=value word per field set.
type argv []string

func (a *argv) str(name, value string) {
	if value != "" {
		*a = append(*a, "--"+name+"="+value)
	}
}

func (a *argv) flag(name string, set bool) {
	if set {
		*a = append(*a, "--"+name)
	}
}

func (a *argv) duration(name string, d time.Duration) {
	if d != 0 {
		a.str(name, d.String())
	}
}

func (a argv) then(command []string) []string {
	if len(command) == 0 {
		return a
	}
	return append(append(a, "--"), command...)
}
