package framework

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// SCCVerdict is what OpenShift's SCC admission plugin decides of a pod of
// a project, created by a user granted restricted-v2 as every
// authenticated user is: the SCC that admits it, or OpenShift's refusal in
// its own words. It runs OpenShift's code (openshift-scc check, built by
// hack/testbin/build.sh openshift), not a reading of its rules.
type SCCVerdict struct {
	SCC     string `json:"scc"`
	Refusal string `json:"refusal"`
}

// JudgeSCC judges each pod spec, by name.
func JudgeSCC(specs map[string]*corev1.PodSpec) (map[string]SCCVerdict, error) {
	type pod struct {
		Name string          `json:"name"`
		Spec *corev1.PodSpec `json:"spec"`
	}
	pods := make([]pod, 0, len(specs))
	for name, spec := range specs {
		pods = append(pods, pod{name, spec})
	}
	in, err := json.Marshal(pods)
	if err != nil {
		return nil, err
	}
	testbin := filepath.Join(RepoRoot(), ".testbin")
	if v := os.Getenv("TESTBIN"); v != "" {
		testbin = v
	}
	bin := filepath.Join(testbin, "bin", "openshift-scc")
	cmd := exec.Command(bin, "check")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s check (hack/testbin/build.sh openshift builds it): %w: %s", bin, err, stderr.String())
	}
	var verdicts []struct {
		Name string `json:"name"`
		SCCVerdict
	}
	if err := json.Unmarshal(out, &verdicts); err != nil {
		return nil, fmt.Errorf("reading the verdicts: %w", err)
	}
	result := make(map[string]SCCVerdict, len(verdicts))
	for _, v := range verdicts {
		result[v.Name] = v.SCCVerdict
	}
	return result, nil
}

// JudgeSCCOne judges one pod spec.
func JudgeSCCOne(spec *corev1.PodSpec) (SCCVerdict, error) {
	v, err := JudgeSCC(map[string]*corev1.PodSpec{"pod": spec})
	return v["pod"], err
}
