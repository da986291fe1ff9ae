// Command openshift-scc gives the local cluster OpenShift's pod security:
// OpenShift's own SecurityContextConstraints admission plugin
// (apiserver-library-go's sccadmission), served as a mutating admission
// webhook for pods, and the namespace annotations OpenShift's namespace
// allocation writes (a UID block, supplemental groups and an SELinux MCS
// level per namespace), which restricted-v2 assigns pods from.
//
//	openshift-scc -kubeconfig FILE -listen 127.0.0.1:PORT -cert-dir DIR
//	openshift-scc check < pods.json   # pods judged without a cluster (check.go)
//
// At start it creates the standard SCCs the plugin requires, and lets every
// authenticated user use restricted-v2, as OpenShift's defaults do.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	securityv1 "github.com/openshift/api/security/v1"
	"github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccadmission"
	securityclient "github.com/openshift/client-go/security/clientset/versioned"
	securityinformers "github.com/openshift/client-go/security/informers/externalversions"
	"github.com/openshift/library-go/pkg/security/uid"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	coreapi "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		if err := check(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "openshift-scc check:", err)
			os.Exit(1)
		}
		return
	}
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	listen := flag.String("listen", "127.0.0.1:0", "where the webhook listens")
	certDir := flag.String("cert-dir", "", "directory of tls.crt and tls.key")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *listen, *certDir); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "openshift-scc:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, listen, certDir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	sec, err := securityclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := ensureDefaults(ctx, kube, sec); err != nil {
		return fmt.Errorf("creating the standard SCCs: %w", err)
	}
	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	secInformers := securityinformers.NewSharedInformerFactory(sec, 0)
	plugin := sccadmission.NewConstraint()
	plugin.SetSecurityInformers(secInformers.Security().V1().SecurityContextConstraints())
	plugin.SetExternalKubeInformerFactory(kubeInformers)
	plugin.SetAuthorizer(reviewer{kube})
	if err := plugin.ValidateInitialization(); err != nil {
		return err
	}
	alloc := &allocator{kube: kube, used: map[uint32]bool{}}
	namespaces := kubeInformers.Core().V1().Namespaces().Informer()
	if _, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { alloc.allocate(ctx, o) },
		UpdateFunc: func(_, o any) { alloc.allocate(ctx, o) },
	}); err != nil {
		return err
	}
	kubeInformers.Start(ctx.Done())
	secInformers.Start(ctx.Done())
	kubeInformers.WaitForCacheSync(ctx.Done())
	secInformers.WaitForCacheSync(ctx.Done())

	mux := http.NewServeMux()
	mux.Handle("/pods", admitPods(plugin))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Println("openshift-scc: serving SCC admission on", listen)
	err = srv.ListenAndServeTLS(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// admitPods runs OpenShift's SCC admission (mutation, which validates) on
// a pod's creation and answers with the patch it made, or its refusal in
// its own words.
func admitPods(plugin admission.MutationInterface) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "an AdmissionReview is expected", http.StatusBadRequest)
			return
		}
		req := review.Request
		review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		if patch, err := admit(r.Context(), plugin, req); err != nil {
			review.Response.Allowed = false
			status := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
			var apiErr apierrors.APIStatus
			if errors.As(err, &apiErr) {
				status = apiErr.Status()
			}
			review.Response.Result = &status
		} else if len(patch) > 0 {
			pt := admissionv1.PatchTypeJSONPatch
			review.Response.Patch, review.Response.PatchType = patch, &pt
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})
}

func admit(ctx context.Context, plugin admission.MutationInterface, req *admissionv1.AdmissionRequest) ([]byte, error) {
	if req.Kind.Kind != "Pod" || req.SubResource != "" {
		return nil, nil
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return nil, err
	}
	internal := &coreapi.Pod{}
	if err := legacyscheme.Scheme.Convert(&pod, internal, nil); err != nil {
		return nil, err
	}
	var old runtime.Object
	if req.Operation == admissionv1.Update {
		var oldPod corev1.Pod
		if err := json.Unmarshal(req.OldObject.Raw, &oldPod); err != nil {
			return nil, err
		}
		oldInternal := &coreapi.Pod{}
		if err := legacyscheme.Scheme.Convert(&oldPod, oldInternal, nil); err != nil {
			return nil, err
		}
		old = oldInternal
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = v
	}
	attrs := admission.NewAttributesRecord(internal, old, coreapi.Kind("Pod").WithVersion(""), req.Namespace, req.Name,
		coreapi.Resource("pods").WithVersion(""), req.SubResource, admission.Operation(req.Operation), nil, req.DryRun != nil && *req.DryRun,
		&user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra})
	if err := plugin.Admit(ctx, attrs, nil); err != nil {
		return nil, err
	}
	var out corev1.Pod
	if err := legacyscheme.Scheme.Convert(internal, &out, nil); err != nil {
		return nil, err
	}
	mutated, err := json.Marshal(&out)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(req.Object.Raw, mutated)
	if err != nil || len(ops) == 0 {
		return nil, err
	}
	return json.Marshal(ops)
}

// reviewer asks the API server whether a user may use an SCC, as
// OpenShift's API server asks its authorizer.
type reviewer struct{ kube kubernetes.Interface }

func (r reviewer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Resource: a.GetResource(), Name: a.GetName(),
		},
	}}
	out, err := r.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	if out.Status.Allowed {
		return authorizer.DecisionAllow, out.Status.Reason, nil
	}
	return authorizer.DecisionNoOpinion, out.Status.Reason, nil
}

// allocator gives each namespace a block of OpenShift's default UID range
// (1000000000-1999999999, 10000 a namespace), the same block as its
// supplemental groups, and an MCS level, as OpenShift's namespace
// allocation does.
type allocator struct {
	kube kubernetes.Interface
	mu   sync.Mutex
	used map[uint32]bool
}

var uidRange, _ = uid.NewRange(1000000000, 1999999999, 10000)

func (a *allocator) allocate(ctx context.Context, o any) {
	ns, ok := o.(*corev1.Namespace)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if have := ns.Annotations[securityv1.UIDRangeAnnotation]; have != "" {
		if b, err := uid.ParseBlock(have); err == nil {
			if ok, offset := uidRange.Offset(b); ok {
				a.used[offset] = true
			}
		}
		return
	}
	var offset uint32
	for a.used[offset] {
		offset++
	}
	block, ok := uidRange.BlockAt(offset)
	if !ok {
		fmt.Fprintln(os.Stderr, "openshift-scc: the UID range is exhausted")
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		securityv1.UIDRangeAnnotation:           block.String(),
		securityv1.SupplementalGroupsAnnotation: block.String(),
		securityv1.MCSAnnotation:                mcsLevel(offset),
	}}})
	if _, err := a.kube.CoreV1().Namespaces().Patch(ctx, ns.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "openshift-scc: annotating namespace %s: %v\n", ns.Name, err)
		return
	}
	a.used[offset] = true
}

// mcsLevel is the n-th SELinux level of two categories: s0:c1,c0,
// s0:c2,c0, s0:c2,c1, ... (OpenShift's order, from c0 to c1023).
func mcsLevel(n uint32) string {
	for hi := uint32(1); hi < 1024; hi++ {
		if n < hi {
			return "s0:c" + strconv.Itoa(int(hi)) + ",c" + strconv.Itoa(int(n))
		}
		n -= hi
	}
	return "s0"
}

// ensureDefaults creates OpenShift's standard SCCs, which the admission
// plugin requires before it admits anything, and the binding that lets every
// authenticated user use restricted-v2.
func ensureDefaults(ctx context.Context, kube kubernetes.Interface, sec securityclient.Interface) error {
	for _, scc := range standardSCCs() {
		if _, err := sec.SecurityV1().SecurityContextConstraints().Create(ctx, scc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating SCC %s: %w", scc.Name, err)
		}
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:openshift:scc:restricted-v2"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{securityv1.GroupName}, Resources: []string{"securitycontextconstraints"},
			ResourceNames: []string{"restricted-v2"}, Verbs: []string{"use"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:openshift:scc:restricted-v2"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// standardSCCs are the SCCs every OpenShift cluster has, as OpenShift's
// documentation describes them ("Default security context constraints").
func standardSCCs() []*securityv1.SecurityContextConstraints {
	caps := func(c ...corev1.Capability) []corev1.Capability { return c }
	ids := func(t string) (securityv1.RunAsUserStrategyOptions, securityv1.SELinuxContextStrategyOptions) {
		return securityv1.RunAsUserStrategyOptions{Type: securityv1.RunAsUserStrategyType(t)},
			securityv1.SELinuxContextStrategyOptions{Type: securityv1.SELinuxStrategyMustRunAs}
	}
	volumes := []securityv1.FSType{securityv1.FSTypeConfigMap, securityv1.FSTypeCSI, securityv1.FSTypeDownwardAPI, securityv1.FSTypeEmptyDir,
		securityv1.FSTypeEphemeral, securityv1.FSTypePersistentVolumeClaim, securityv1.FSProjected, securityv1.FSTypeSecret}
	withHost := append(append([]securityv1.FSType{}, volumes...), securityv1.FSTypeHostPath)
	legacyDrop := caps("KILL", "MKNOD", "SETUID", "SETGID")
	noEscalation := func() *bool { f := false; return &f }
	fs := func(t securityv1.FSGroupStrategyType) securityv1.FSGroupStrategyOptions {
		return securityv1.FSGroupStrategyOptions{Type: t}
	}
	sg := func(t securityv1.SupplementalGroupsStrategyType) securityv1.SupplementalGroupsStrategyOptions {
		return securityv1.SupplementalGroupsStrategyOptions{Type: t}
	}
	scc := func(name string, f func(*securityv1.SecurityContextConstraints)) *securityv1.SecurityContextConstraints {
		s := &securityv1.SecurityContextConstraints{ObjectMeta: metav1.ObjectMeta{Name: name}, Volumes: volumes,
			FSGroup: fs(securityv1.FSGroupStrategyMustRunAs), SupplementalGroups: sg(securityv1.SupplementalGroupsStrategyRunAsAny)}
		s.RunAsUser, s.SELinuxContext = ids(string(securityv1.RunAsUserStrategyMustRunAsRange))
		f(s)
		return s
	}
	v2 := func(s *securityv1.SecurityContextConstraints) {
		s.AllowPrivilegeEscalation = noEscalation()
		s.RequiredDropCapabilities, s.AllowedCapabilities = caps("ALL"), caps("NET_BIND_SERVICE")
		s.SeccompProfiles = []string{"runtime/default"}
	}
	ten := int32(10)
	out := []*securityv1.SecurityContextConstraints{
		scc("restricted-v2", v2),
		scc("restricted", func(s *securityv1.SecurityContextConstraints) { s.RequiredDropCapabilities = legacyDrop }),
		scc("nonroot-v2", func(s *securityv1.SecurityContextConstraints) {
			v2(s)
			s.RunAsUser.Type = securityv1.RunAsUserStrategyMustRunAsNonRoot
			s.FSGroup = fs(securityv1.FSGroupStrategyRunAsAny)
		}),
		scc("nonroot", func(s *securityv1.SecurityContextConstraints) {
			s.RequiredDropCapabilities = legacyDrop
			s.RunAsUser.Type = securityv1.RunAsUserStrategyMustRunAsNonRoot
			s.FSGroup = fs(securityv1.FSGroupStrategyRunAsAny)
		}),
		scc("anyuid", func(s *securityv1.SecurityContextConstraints) {
			s.RequiredDropCapabilities = caps("MKNOD")
			s.RunAsUser.Type = securityv1.RunAsUserStrategyRunAsAny
			s.FSGroup = fs(securityv1.FSGroupStrategyRunAsAny)
			s.Groups, s.Priority = []string{"system:cluster-admins"}, &ten
		}),
		scc("hostnetwork-v2", func(s *securityv1.SecurityContextConstraints) {
			v2(s)
			s.AllowHostNetwork, s.AllowHostPorts = true, true
			s.SupplementalGroups = sg(securityv1.SupplementalGroupsStrategyMustRunAs)
		}),
		scc("hostnetwork", func(s *securityv1.SecurityContextConstraints) {
			s.RequiredDropCapabilities = legacyDrop
			s.AllowHostNetwork, s.AllowHostPorts = true, true
			s.SupplementalGroups = sg(securityv1.SupplementalGroupsStrategyMustRunAs)
		}),
		scc("hostaccess", func(s *securityv1.SecurityContextConstraints) {
			s.RequiredDropCapabilities, s.Volumes = legacyDrop, withHost
			s.AllowHostDirVolumePlugin, s.AllowHostIPC, s.AllowHostNetwork, s.AllowHostPID, s.AllowHostPorts = true, true, true, true, true
		}),
		scc("hostmount-anyuid", func(s *securityv1.SecurityContextConstraints) {
			s.RequiredDropCapabilities, s.Volumes = caps("MKNOD"), append(withHost, securityv1.FSTypeNFS)
			s.AllowHostDirVolumePlugin = true
			s.RunAsUser.Type = securityv1.RunAsUserStrategyRunAsAny
			s.FSGroup = fs(securityv1.FSGroupStrategyRunAsAny)
		}),
		scc("privileged", func(s *securityv1.SecurityContextConstraints) {
			s.AllowPrivilegedContainer, s.AllowedCapabilities, s.Volumes = true, caps("*"), []securityv1.FSType{securityv1.FSTypeAll}
			s.AllowHostDirVolumePlugin, s.AllowHostIPC, s.AllowHostNetwork, s.AllowHostPID, s.AllowHostPorts = true, true, true, true, true
			s.RunAsUser.Type, s.SELinuxContext.Type = securityv1.RunAsUserStrategyRunAsAny, securityv1.SELinuxStrategyRunAsAny
			s.FSGroup, s.SupplementalGroups = fs(securityv1.FSGroupStrategyRunAsAny), sg(securityv1.SupplementalGroupsStrategyRunAsAny)
			s.SeccompProfiles, s.AllowedUnsafeSysctls = []string{"*"}, []string{"*"}
			s.Users, s.Groups = []string{"system:admin"}, []string{"system:cluster-admins", "system:nodes", "system:masters"}
		}),
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
