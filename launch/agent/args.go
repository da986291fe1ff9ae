package agent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Command is what an ssh command line asks for.
type Command struct {
	User, Host string
	// Port is 0 where the command line names none.
	Port int
	// ConnectTimeout bounds each connection attempt and the handshake;
	// zero leaves the connect to the system's timeout.
	ConnectTimeout time.Duration
	// ConnectionAttempts is 0 where the command line sets none.
	ConnectionAttempts int
	// NoStdin (-n) sends the command no input.
	NoStdin bool
	// Command is the remote command: ssh's words joined by single spaces,
	// for the remote shell to split again.
	Command string
}

// Options of ssh that change nothing here: X11 and agent forwarding (which
// the server refuses anyway), quiet, tty allocation (launchers ask for
// none), verbosity, compression, address family; and, with a value, the
// configuration file, identity, ciphers, MACs, logging and binding.
const (
	ignoredFlags   = "46AaCKkqTtvXxYy"
	ignoredOptions = "BbcEeFIimS"
)

// ParseArgs reads the ssh command line launchers build: options, the host
// ([user@]host), more options (ssh reads them after the host too), then
// the remote command. Of -o options only Port, User, ConnectTimeout and
// ConnectionAttempts take effect; the others are accepted, since
// launchers' and users' ssh arguments carry options like
// StrictHostKeyChecking that mean nothing here.
func ParseArgs(args []string) (Command, error) {
	var c Command
	i, ended, err := c.parseOptions(args)
	if err != nil {
		return Command{}, err
	}
	if i == len(args) {
		return Command{}, errors.New("no host given")
	}
	host := args[i]
	i++
	if !ended {
		n, _, err := c.parseOptions(args[i:])
		if err != nil {
			return Command{}, err
		}
		i += n
	}
	if at := strings.LastIndex(host, "@"); at >= 0 {
		// -l and -o User win over user@, as in ssh.
		if c.User == "" {
			c.User = host[:at]
		}
		host = host[at+1:]
	}
	if host == "" {
		return Command{}, errors.New("empty host name")
	}
	c.Host = host
	if i == len(args) {
		return Command{}, errors.New("no remote command given: only commands are run, no login shells")
	}
	c.Command = strings.Join(args[i:], " ")
	return c, nil
}

// parseOptions reads options up to the first word that is not one, or
// past "--" (ended), and returns how many words it took.
func (c *Command) parseOptions(args []string) (n int, ended bool, err error) {
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			return i + 1, true, nil
		}
		if len(a) < 2 || a[0] != '-' {
			return i, false, nil
		}
		i++
		// Flags may be grouped (-xq); the last one may take a value,
		// attached (-p22) or as the next word (-p 22).
		for j := 1; j < len(a); j++ {
			f := a[j]
			switch {
			case f == 'n':
				c.NoStdin = true
			case strings.IndexByte(ignoredFlags, f) >= 0:
			case strings.IndexByte(ignoredOptions+"lop", f) >= 0:
				v := a[j+1:]
				if v == "" {
					if i == len(args) {
						return 0, false, fmt.Errorf("option -%c needs a value", f)
					}
					v = args[i]
					i++
				}
				if err := c.option(f, v); err != nil {
					return 0, false, err
				}
				j = len(a)
			default:
				return 0, false, fmt.Errorf("option -%c is not supported", f)
			}
		}
	}
	return i, false, nil
}

func (c *Command) option(f byte, v string) error {
	switch f {
	case 'l':
		c.User = v
	case 'p':
		return c.setPort(v)
	case 'o':
		return c.config(v)
	}
	return nil
}

// config reads one -o option: "Keyword=value" or "Keyword value".
func (c *Command) config(opt string) error {
	key, value, ok := strings.Cut(opt, "=")
	if !ok {
		key, value, _ = strings.Cut(strings.TrimSpace(opt), " ")
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	switch strings.ToLower(key) {
	case "port":
		return c.setPort(value)
	case "user":
		c.User = value
	case "connecttimeout":
		s, err := strconv.Atoi(value)
		if err != nil || s < 0 {
			return fmt.Errorf("-o %s: want a number of seconds", opt)
		}
		c.ConnectTimeout = time.Duration(s) * time.Second
	case "connectionattempts":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return fmt.Errorf("-o %s: want a positive number", opt)
		}
		c.ConnectionAttempts = n
	}
	return nil
}

func (c *Command) setPort(v string) error {
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("bad port %q", v)
	}
	c.Port = p
	return nil
}
