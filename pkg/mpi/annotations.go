package mpi

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/torus-mpi/torus/api"
)

// parseSSHPort reads api.AnnotationSSHPort.
func parseSSHPort(v string) (int32, error) {
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil || p < 1024 || p > 65535 {
		return 0, fmt.Errorf("annotation %s=%q: set it to a port number between 1024 and 65535 (sshd runs as the pod's non-root user, which cannot bind lower ports)", api.AnnotationSSHPort, v)
	}
	return int32(p), nil
}

// parseRemoteLaunch reads api.AnnotationRemoteLaunch: whether the job's
// daemons are started through Torus's agent.
func parseRemoteLaunch(v string) (bool, error) {
	switch v {
	case api.RemoteLaunchAgent:
		return true, nil
	case api.RemoteLaunchOpenSSH:
		return false, nil
	}
	return false, fmt.Errorf("annotation %s=%q: set it to %q (Torus's launch agent: the image needs no OpenSSH) or %q (the image's sshd and ssh)",
		api.AnnotationRemoteLaunch, v, api.RemoteLaunchAgent, api.RemoteLaunchOpenSSH)
}

// parseLaunchAgentPath reads api.AnnotationLaunchAgentPath: an absolute
// path to a file named LaunchBinary, which the pods run as it is.
func parseLaunchAgentPath(v string) (string, error) {
	if !path.IsAbs(v) || path.Clean(v) != v || path.Base(v) != LaunchBinary || !sshPathPattern.MatchString(v) {
		return "", fmt.Errorf("annotation %s=%q: set it to the absolute path of %s in the job's image, such as /usr/local/bin/%s, or remove it to have an init container bring the binary from Torus's image",
			api.AnnotationLaunchAgentPath, v, LaunchBinary, LaunchBinary)
	}
	return v, nil
}

// parseLaunchAgentDelivery reads api.AnnotationLaunchAgentDelivery.
func parseLaunchAgentDelivery(v string) (string, error) {
	switch v {
	case api.LaunchAgentByInitContainer, api.LaunchAgentByImageVolume, api.LaunchAgentAuto:
		return v, nil
	}
	return "", fmt.Errorf("annotation %s=%q: set it to %q (an init container copies %s from Torus's image: any node), %q (Torus's image mounted as an image volume: no init container; nodes with containerd 2.1 or CRI-O 1.31 or later) or %q (the image volume where the job's nodes mount one)",
		api.AnnotationLaunchAgentDelivery, v, api.LaunchAgentByInitContainer, LaunchBinary, api.LaunchAgentByImageVolume, api.LaunchAgentAuto)
}

// ParseMaxRestarts reads a restart budget (api.AnnotationMaxRestarts,
// kubectl mpi run --max-restarts); its error says what to give, for the
// caller to name where it came from.
func ParseMaxRestarts(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 || n > int64(MaxRestarts) {
		return 0, fmt.Errorf("give how many times the job may start again after its program fails, from 0 to %d (evictions, preemptions and lost nodes do not count)", MaxRestarts)
	}
	return int32(n), nil
}

// ParseTerminationGracePeriod reads a grace period
// (api.AnnotationTerminationGracePeriod, kubectl mpi run
// --termination-grace-period); its error says what to give.
func ParseTerminationGracePeriod(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d > MaxTerminationGracePeriod || d%time.Second != 0 {
		return 0, fmt.Errorf("give how long every rank has from SIGTERM to write a checkpoint and exit, whole seconds from 1s to %s (such as 90s or 5m): Kueue's preemptor and a node drain wait that long", MaxTerminationGracePeriod)
	}
	return d, nil
}

// ParseStallTimeout reads a stall timeout (api.AnnotationStallTimeout,
// kubectl mpi run --stall-timeout); its error says what to give.
func ParseStallTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < MinStallTimeout || d > MaxStallTimeout {
		return 0, fmt.Errorf("give how long the job's launcher may print nothing before the job fails, from %s to %s (such as 30m or 2h): longer than the program's quietest stretch", MinStallTimeout, MaxStallTimeout)
	}
	return d, nil
}

// parseAnnotation names the annotation in parse's error.
func parseAnnotation[T any](name, v string, parse func(string) (T, error)) (T, error) {
	x, err := parse(v)
	if err != nil {
		return x, fmt.Errorf("annotation %s=%q: %w", name, v, err)
	}
	return x, nil
}

// parseSchedulingTimeout reads api.AnnotationSchedulingTimeout.
func parseSchedulingTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("annotation %s=%q: set it to a positive duration such as 10m or 90s", api.AnnotationSchedulingTimeout, v)
	}
	return d, nil
}

// CheckAnnotations checks the values of the Torus annotations on one
// object, a TrainJob or a runtime, each on its own (resolution then takes
// the job's over the runtime's). Each error names the annotation and what
// to set. Annotations are not in the objects' schemas: the admission
// webhooks are where a bad value is stopped, before every job of a runtime
// inherits it.
func CheckAnnotations(annotations map[string]string) map[string]error {
	errs := map[string]error{}
	for k, v := range annotations {
		if !strings.HasPrefix(k, api.Domain) {
			continue
		}
		var err error
		switch k {
		case api.AnnotationSSHPort:
			_, err = parseSSHPort(v)
		case api.AnnotationSchedulingTimeout:
			_, err = parseSchedulingTimeout(v)
		case api.AnnotationMaxRestarts:
			_, err = parseAnnotation(k, v, ParseMaxRestarts)
		case api.AnnotationTerminationGracePeriod:
			_, err = parseAnnotation(k, v, ParseTerminationGracePeriod)
		case api.AnnotationStallTimeout:
			_, err = parseAnnotation(k, v, ParseStallTimeout)
		case api.AnnotationCheckpointVolume:
			// Where Torus mounts its own files depends on the runtime;
			// resolution checks the path against them.
			_, err = ParseCheckpoint(v, DefaultSSHPath)
		case api.AnnotationRemoteLaunch:
			_, err = parseRemoteLaunch(v)
		case api.AnnotationLaunchAgentPath:
			_, err = parseLaunchAgentPath(v)
		case api.AnnotationLaunchAgentDelivery:
			_, err = parseLaunchAgentDelivery(v)
		case api.AnnotationSSHKeyAlgorithm:
			if _, perr := ParseKeyAlgorithm(v); perr != nil {
				err = fmt.Errorf("annotation %s: %w", k, perr)
			}
		case api.AnnotationTopology:
			if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
				err = fmt.Errorf("annotation %s=%q: set it to the node label whose domain all pods must share, such as cloud.provider.com/topology-rack (%s)",
					k, v, strings.Join(msgs, "; "))
			}
		case api.AnnotationKeepSSHKeys:
			if v != "true" && v != "false" {
				err = fmt.Errorf("annotation %s=%q: set it to \"true\" to keep a finished job's SSH Secret, or remove it", k, v)
			}
		case api.AnnotationNetworkProfile:
			if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
				err = fmt.Errorf("annotation %s=%q: set it to the name of an MPINetworkProfile (kubectl get mpinetworkprofiles)", k, v)
			}
		}
		if err != nil {
			errs[k] = err
		}
	}
	return errs
}
