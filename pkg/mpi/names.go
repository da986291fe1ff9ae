package mpi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	sshSecretSuffix = "-mpi-ssh"
	// dnsLabelMax is the longest DNS label, and so the longest pod host name.
	dnsLabelMax = validation.DNS1035LabelMaxLength
)

// DefaultClusterDomain is the DNS domain of a cluster's services unless the
// operator is told otherwise.
const DefaultClusterDomain = "cluster.local"

// JobSetName is the name of the JobSet a TrainJob owns.
func JobSetName(trainJob string) string { return trainJob }

// Subdomain is the headless service, and the pods' DNS subdomain, of a job.
func Subdomain(trainJob string) string { return trainJob }

// SSHSecretName is the name of a job's SSH Secret.
func SSHSecretName(trainJob string) string { return trainJob + sshSecretSuffix }

// PodHostname is the host name JobSet gives pod i of a replicated job that
// has a single Job (index 0).
func PodHostname(trainJob, replicatedJob string, index int32) string {
	return trainJob + "-" + replicatedJob + "-0-" + strconv.Itoa(int(index))
}

// HostAddress is the name the launcher uses for a pod in the hostfile:
// host name and subdomain, resolved through the pods' namespace search path.
func HostAddress(trainJob, replicatedJob string, index int32) string {
	return PodHostname(trainJob, replicatedJob, index) + "." + Subdomain(trainJob)
}

// SearchDomain is the DNS search entry that resolves a job's short host names.
func SearchDomain(trainJob, namespace, clusterDomain string) string {
	return fmt.Sprintf("%s.%s.svc.%s", Subdomain(trainJob), namespace, clusterDomain)
}

// podNameSuffix is what the Job controller appends to a pod's host name to
// name the pod ("-" and 5 random characters); JobSet's admission checks
// that the result is a valid DNS label.
const podNameSuffix = len("-abcde")

// MaxTrainJobNameLength is the longest TrainJob name whose pods still get
// valid names (and so host names) with the given number of workers. The
// launcher's is the longer one below a million workers.
func MaxTrainJobNameLength(workers int32) int {
	launcher := len("-" + LauncherJob + "-0-0")
	node := len("-"+NodeJob+"-0-") + len(strconv.Itoa(int(max(workers-1, 0))))
	return dnsLabelMax - podNameSuffix - max(launcher, node)
}

// TrainJobNameProblems says why name cannot name the TrainJob of an MPI job
// with that many workers, or returns nothing: it must be an RFC 1035 label
// (the CRD's rule), and short enough that the pods JobSet names after it
// get valid names. The plugin, the webhook and migrate all ask it.
func TrainJobNameProblems(name string, workers int32) []string {
	var out []string
	if len(name) > dnsLabelMax {
		out = append(out, fmt.Sprintf("is %d characters; a TrainJob name is an RFC 1035 label of at most %d", len(name), dnsLabelMax))
	}
	if strings.Contains(name, ".") {
		out = append(out, `contains ".": a TrainJob name is an RFC 1035 label, which has no dots`)
	}
	// apimachinery's DNS-1035 label check, the pattern of the CRD's CEL
	// rule; its length is reported above and dots already named.
	if slices.ContainsFunc(validation.IsDNS1035Label(strings.ReplaceAll(name, ".", "-")), func(p string) bool {
		return p != validation.MaxLenError(dnsLabelMax)
	}) {
		out = append(out, "is not an RFC 1035 label: use lowercase letters, digits and '-', start with a letter and end with a letter or digit")
	}
	if len(out) > 0 {
		return out
	}
	if limit := MaxTrainJobNameLength(workers); len(name) > limit {
		out = append(out, fmt.Sprintf("is %d characters; an MPI job needs at most %d so that pod names such as %q fit in %d characters: choose a shorter name",
			len(name), limit, PodHostname(name, LauncherJob, 0)+"-abcde", dnsLabelMax))
	}
	return out
}
