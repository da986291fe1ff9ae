package migrate

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// mpiOperatorSSHD is what mpi-operator v0.8.2 runs on a worker whose
// container has neither command nor args.
const mpiOperatorSSHD = "/usr/sbin/sshd -De"

// sshd options that take an argument (sshd(8)).
const sshdOptionsWithArgument = "CcEfghkoup"

// token is one element of a container's command line and the list it came
// from, so that a rewrite keeps command and args where the user had them
// (an image's ENTRYPOINT runs only when command is empty).
type token struct {
	value  string
	inArgs bool
}

// rewriteWorkerCommand makes a worker's sshd read the configuration Torus
// writes into the SSH directory and listen where Torus's ssh client
// connects. It reports whether the worker runs an sshd the converter
// understood; only then is a readiness probe on the sshd port safe to add.
func rewriteWorkerCommand(c *corev1.Container, sshPath string, p fieldPath, r *reporter) bool {
	cfg := mpi.SSHDConfigPath(sshPath)
	want := mpi.SSHDCommand(sshPath)
	if len(c.Command) == 0 && len(c.Args) == 0 {
		c.Command = want[:1]
		c.Args = append([]string(nil), want[1:]...)
		r.change(p.Child("command"), "none set: mpi-operator ran %q; set to %q, which reads the sshd configuration Torus writes",
			mpiOperatorSSHD, strings.Join(want, " "))
		return true
	}
	var toks []token
	for _, s := range c.Command {
		toks = append(toks, token{value: s})
	}
	for _, s := range c.Args {
		toks = append(toks, token{value: s, inArgs: true})
	}
	fieldOf := func(i int) fieldPath {
		if toks[i].inArgs {
			return p.Child("args").Index(i - len(c.Command))
		}
		return p.Child("command").Index(i)
	}
	argv0 := toks[0].value
	if path.Base(argv0) != "sshd" {
		line := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
		switch {
		case strings.Contains(line, "sshd"):
			r.warn(fieldOf(0), "the worker starts sshd in a way the converter cannot rewrite (%q): make sure it runs %q, so that sshd uses the job's host key, authorized keys and port %d",
				line, strings.Join(want, " "), mpi.DefaultSSHPort)
		case len(c.Command) == 0:
			r.warn(fieldOf(0), "the worker passes %q to its image's entrypoint: if that starts sshd, make it run %q; Torus's launcher connects to workers with ssh on port %d",
				line, strings.Join(want, " "), mpi.DefaultSSHPort)
		default:
			r.warn(fieldOf(0), "the worker does not start sshd (%q): kept as is, but Torus's launcher connects to workers with ssh on port %d; run %q on workers",
				line, mpi.DefaultSSHPort, strings.Join(want, " "))
		}
		return false
	}

	out := []token{toks[0]}
	emit := func(v string, inArgs bool) { out = append(out, token{value: v, inArgs: inArgs}) }
	sawConfig, sawForeground := false, false
	for i := 1; i < len(toks); i++ {
		t := toks[i]
		if t.value == "-" || !strings.HasPrefix(t.value, "-") || strings.HasPrefix(t.value, "--") {
			emit(t.value, t.inArgs)
			continue
		}
		group := "-"
		letters := t.value[1:]
		for j := 0; j < len(letters); j++ {
			l := letters[j]
			if l == 'D' {
				sawForeground = true
			}
			if strings.IndexByte(sshdOptionsWithArgument, l) < 0 {
				group += string(l)
				continue
			}
			arg, argField := letters[j+1:], fieldOf(i)
			if arg == "" && i+1 < len(toks) {
				i++
				arg, argField = toks[i].value, fieldOf(i)
			}
			if len(group) > 1 {
				emit(group, t.inArgs)
				group = "-"
			}
			switch l {
			case 'f':
				sawConfig = true
				emit("-f", t.inArgs)
				emit(cfg, t.inArgs)
				if arg != cfg {
					r.change(argField, "sshd configuration %q replaced by %q, which Torus writes for the job", arg, cfg)
					r.warn(argField, "settings in the image's own sshd configuration %q no longer apply: Torus's sshd_config sets port %d, the job's host key and authorized keys, no passwords", arg, mpi.DefaultSSHPort)
				}
			case 'p':
				r.warn(argField, "sshd -p %s removed: Torus's ssh client connects on port %d, which its sshd_config sets (annotation %s changes it)", arg, mpi.DefaultSSHPort, api.AnnotationSSHPort)
			case 'o':
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(arg)), "port") {
					r.warn(argField, "sshd -o %s removed: Torus's ssh client connects on port %d, which its sshd_config sets (annotation %s changes it)", arg, mpi.DefaultSSHPort, api.AnnotationSSHPort)
					break
				}
				emit("-o", t.inArgs)
				emit(arg, t.inArgs)
			default:
				emit("-"+string(l), t.inArgs)
				emit(arg, t.inArgs)
			}
			break
		}
		if len(group) > 1 {
			emit(group, t.inArgs)
		}
	}
	if !sawConfig {
		inArgs := len(c.Args) > 0
		emit("-f", inArgs)
		emit(cfg, inArgs)
		r.change(p.Child(map[bool]string{true: "args", false: "command"}[inArgs]), "added -f %s: sshd reads the configuration Torus writes for the job (host key, authorized keys, port %d)", cfg, mpi.DefaultSSHPort)
	}
	if !sawForeground {
		r.warn(fieldOf(0), "sshd runs without -D, so it detaches and the container exits: run %q", strings.Join(want, " "))
	}
	var cmd, args []string
	for _, t := range out {
		if t.inArgs {
			args = append(args, t.value)
		} else {
			cmd = append(cmd, t.value)
		}
	}
	c.Command, c.Args = cmd, args
	return true
}

// ensureSSHDProbe makes a worker Ready only once sshd accepts connections,
// so that the launcher, which starts when workers are Ready, finds them. It
// adds a startup probe, which stops once sshd answers: sshd logs every
// probe's connection, which a readiness probe would repeat all along.
func ensureSSHDProbe(c *corev1.Container, p fieldPath, r *reporter) {
	port := intstr.FromInt32(mpi.DefaultSSHPort)
	if c.StartupProbe == nil && c.ReadinessProbe == nil {
		c.StartupProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
			PeriodSeconds:    1,
			FailureThreshold: 120,
		}
		r.change(p.Child("startupProbe"), "added a TCP startup probe on sshd's port %d: a worker is then Ready once sshd answers, which bounds the launcher's wait for it", mpi.DefaultSSHPort)
		return
	}
	for _, probe := range []struct {
		name string
		pr   *corev1.Probe
	}{{"startupProbe", c.StartupProbe}, {"readinessProbe", c.ReadinessProbe}} {
		if pr := probe.pr; pr != nil && pr.TCPSocket != nil && pr.TCPSocket.Port.Type == intstr.Int && pr.TCPSocket.Port.IntVal != mpi.DefaultSSHPort {
			r.warn(p.Child(probe.name, "tcpSocket", "port"), "port %d changed to %d, where Torus's sshd listens", pr.TCPSocket.Port.IntVal, mpi.DefaultSSHPort)
			pr.TCPSocket.Port = port
		}
	}
}
