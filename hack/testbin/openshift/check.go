package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	securityv1 "github.com/openshift/api/security/v1"
	"github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccadmission"
	securityfake "github.com/openshift/client-go/security/clientset/versioned/fake"
	securityinformers "github.com/openshift/client-go/security/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	coreapi "k8s.io/kubernetes/pkg/apis/core"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// The check mode: pods judged without a cluster, by the same code a cluster
// runs. OpenShift's SCC admission plugin decides each pod as a pod of a
// project whose UID range is checkNamespaceRange, created by a user who may
// use restricted-v2 only (every authenticated user's grant); its listers are
// filled with the standard SCCs and that namespace. Kubernetes's Pod
// Security checks say whether the pod meets the restricted standard.
//
//	openshift-scc check < pods.json > verdicts.json
//
// The input is a JSON list of {"name", "spec"}; the output, one verdict a
// pod: the SCC that admitted it or OpenShift's refusal, and the restricted
// standard's objections.

const (
	checkNamespace      = "team"
	checkNamespaceRange = "1000680000/10000"
)

type checkPod struct {
	Name string         `json:"name"`
	Spec corev1.PodSpec `json:"spec"`
}

// Verdict is what the check says of one pod.
type Verdict struct {
	Name string `json:"name"`
	// SCC admitted the pod; Refusal is OpenShift's words when none did.
	SCC     string `json:"scc,omitempty"`
	Refusal string `json:"refusal,omitempty"`
	// Restricted lists how the pod breaks the restricted Pod Security
	// Standard.
	Restricted []string `json:"restricted,omitempty"`
}

func check(ctx context.Context, in io.Reader, out io.Writer) error {
	var pods []checkPod
	if err := json.NewDecoder(in).Decode(&pods); err != nil {
		return fmt.Errorf("reading the pods: %w", err)
	}
	plugin, err := offlinePlugin(ctx)
	if err != nil {
		return err
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return err
	}
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	verdicts := make([]Verdict, 0, len(pods))
	for _, p := range pods {
		v := Verdict{Name: p.Name}
		meta := metav1.ObjectMeta{Name: p.Name, Namespace: checkNamespace}
		for _, r := range evaluator.EvaluatePod(restricted, &meta, &p.Spec) {
			if !r.Allowed {
				v.Restricted = append(v.Restricted, r.ForbiddenReason+": "+r.ForbiddenDetail)
			}
		}
		pod := &corev1.Pod{ObjectMeta: meta, Spec: p.Spec}
		internal := &coreapi.Pod{}
		if err := legacyscheme.Scheme.Convert(pod, internal, nil); err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		attrs := admission.NewAttributesRecord(internal, nil, coreapi.Kind("Pod").WithVersion(""), checkNamespace, p.Name,
			coreapi.Resource("pods").WithVersion(""), "", admission.Create, nil, false,
			&user.DefaultInfo{Name: "system:serviceaccount:kube-system:job-controller", Groups: []string{"system:serviceaccounts", "system:authenticated"}})
		if err := plugin.Admit(ctx, attrs, nil); err != nil {
			v.Refusal = err.Error()
		} else {
			v.SCC = internal.Annotations[securityv1.ValidatedSCCAnnotation]
		}
		verdicts = append(verdicts, v)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(verdicts)
}

// offlinePlugin is OpenShift's SCC admission plugin over listers filled
// with the standard SCCs and the check's namespace.
func offlinePlugin(ctx context.Context) (admission.MutationInterface, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: checkNamespace, Annotations: map[string]string{
		securityv1.UIDRangeAnnotation: checkNamespaceRange, securityv1.SupplementalGroupsAnnotation: checkNamespaceRange,
		securityv1.MCSAnnotation: mcsLevel(68),
	}}}
	// Created through the client rather than given to it: its tracker
	// would guess the SCCs' resource name from their kind, wrongly.
	sec := securityfake.NewSimpleClientset()
	for _, s := range standardSCCs() {
		if _, err := sec.SecurityV1().SecurityContextConstraints().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	kubeInformers := informers.NewSharedInformerFactory(kubefake.NewClientset(ns), 0)
	secInformers := securityinformers.NewSharedInformerFactory(sec, 0)
	plugin := sccadmission.NewConstraint()
	plugin.SetSecurityInformers(secInformers.Security().V1().SecurityContextConstraints())
	plugin.SetExternalKubeInformerFactory(kubeInformers)
	plugin.SetAuthorizer(restrictedV2Only{})
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, err
	}
	kubeInformers.Start(ctx.Done())
	secInformers.Start(ctx.Done())
	synced, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kubeInformers.WaitForCacheSync(synced.Done())
	secInformers.WaitForCacheSync(synced.Done())
	return plugin, nil
}

// restrictedV2Only grants the use of restricted-v2, as OpenShift grants it
// to every authenticated user, and nothing else.
type restrictedV2Only struct{}

func (restrictedV2Only) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() == "use" && a.GetResource() == "securitycontextconstraints" && a.GetName() == "restricted-v2" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}
