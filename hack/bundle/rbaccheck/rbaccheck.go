// Package rbaccheck holds the least-privilege rules every RBAC rule Torus
// ships must keep: the generated ClusterRole and Role, the kustomize
// output, and the CSV's permissions that OLM grants. The unit tests and the
// OLM end-to-end suite apply the same rules.
package rbaccheck

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// SecretVerbs is all the operator does with Secrets: it creates each job's
// immutable SSH Secret, reads and watches the Secrets labelled with a Torus
// job name (its cache selects on that label), and deletes a job's keys when
// the job suspends or ends. It never updates, patches or lists-and-reads
// Secrets beyond that cache.
var SecretVerbs = []string{"create", "delete", "get", "list", "watch"}

// dangerousVerbs let a subject widen its own or another's permissions.
var dangerousVerbs = []string{"escalate", "bind", "impersonate", "*"}

// dangerousResources are objects whose write access is cluster
// administration, not running MPI jobs.
var dangerousResources = map[string][]string{
	"rbac.authorization.k8s.io": {"roles", "clusterroles", "rolebindings", "clusterrolebindings"},
	"apiextensions.k8s.io":      {"customresourcedefinitions"},
	"admissionregistration.k8s.io": {"mutatingwebhookconfigurations", "validatingwebhookconfigurations",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings"},
	"": {"serviceaccounts/token", "nodes/proxy", "pods/exec", "pods/attach"},
}

// Violations lists every way rules grant more than Torus needs; scope names
// the role in the messages.
func Violations(scope string, rules []rbacv1.PolicyRule) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, scope+": "+fmt.Sprintf(format, args...)) }
	for i, r := range rules {
		for _, field := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
			if slices.Contains(field, "*") {
				bad("rule %d (%v %v %v) uses the wildcard *", i, r.APIGroups, r.Resources, r.Verbs)
				break
			}
		}
		if len(r.NonResourceURLs) > 0 && !metricsRead(r) {
			bad("rule %d grants non-resource URLs %v", i, r.NonResourceURLs)
		}
		for _, verb := range r.Verbs {
			if slices.Contains(dangerousVerbs, verb) && verb != "*" {
				bad("rule %d grants %q on %v", i, verb, r.Resources)
			}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if g == "" && res == "secrets" {
					for _, verb := range r.Verbs {
						if !slices.Contains(SecretVerbs, verb) {
							bad("rule %d grants %q on Secrets; Torus only needs %v", i, verb, SecretVerbs)
						}
					}
				}
				if slices.Contains(dangerousResources[g], res) && !namedRead(r) {
					bad("rule %d grants %v on %s in group %q", i, r.Verbs, res, g)
				}
			}
		}
	}
	return v
}

// namedRead is a rule that only reads named objects: the operator reads
// upstream Trainer's webhook configuration by name to refuse to run beside
// it, which administers nothing.
func namedRead(r rbacv1.PolicyRule) bool {
	if len(r.ResourceNames) == 0 {
		return false
	}
	for _, v := range r.Verbs {
		if v != "get" {
			return false
		}
	}
	return true
}

// metricsRead only reads /metrics: the role scrapers are bound to.
func metricsRead(r rbacv1.PolicyRule) bool {
	return slices.Equal(r.NonResourceURLs, []string{"/metrics"}) && slices.Equal(r.Verbs, []string{"get"})
}
