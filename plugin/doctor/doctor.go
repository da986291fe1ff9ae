// Package doctor is kubectl mpi doctor, which checks that a cluster can run
// MPI jobs with Torus, and that the user can: the APIs Torus needs, the
// operator and its webhooks, the runtimes, the queues and permissions,
// network profiles and GPUs. Every check passes, warns or fails, and says
// how to fix what it found.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
)

// status of a check.
type status string

const (
	pass status = "PASS"
	warn status = "WARN"
	fail status = "FAIL"
)

// result is one check's finding.
type result struct {
	Check   string `json:"check"`
	Status  status `json:"status"`
	Message string `json:"message"`
	// Fix says what to do; empty on a pass.
	Fix string `json:"fix,omitempty"`
}

// leaseName is the operator's leader-election lease.
const leaseName = operatorstatus.LeaseName

// doctor runs the checks.
type doctor struct {
	Client    client.Client
	Discovery discovery.DiscoveryInterface
	Namespace string
	Now       func() time.Time
	// Network, when set, also runs the operator's preflight for that
	// MPINetworkProfile in Namespace, for an MPI implementation.
	Network        string
	Implementation mpi.Implementation
	// Checkpoint, when set, also checks that a job's --checkpoint-volume
	// CLAIM[:PATH] would be admitted in Namespace.
	Checkpoint string

	groups map[string]bool
}

// Run runs every check, in the order a broken cluster is best fixed.
func (d *doctor) Run(ctx context.Context) []result {
	if d.Now == nil {
		d.Now = time.Now
	}
	var out []result
	api := d.apiServer()
	out = append(out, api)
	if api.Status == fail {
		return out
	}
	out = append(out, d.apis()...)
	// OpenShift AI's own Trainer controller keeps Torus's from starting.
	if r, ok := d.openShiftAI(ctx); ok {
		out = append(out, r)
	}
	out = append(out, d.operator(ctx), d.webhooks(ctx), d.runtimes(ctx))
	if r, ok := d.imageVolumes(ctx); ok {
		out = append(out, r)
	}
	out = append(out, d.permissions(ctx))
	out = append(out, d.queues(ctx))
	out = append(out, d.networkProfiles(ctx))
	if d.Network != "" {
		out = append(out, d.networkPreflight(ctx))
	}
	if d.Checkpoint != "" {
		out = append(out, d.checkpointVolume(ctx))
	}
	out = append(out, d.gpus(ctx))
	return out
}

// checkpointVolume makes admission's check of a checkpoint claim
// (mpi.Checkpoint.Refusal): the claim exists in the namespace and every pod
// of a job, on whichever node, can write to it.
func (d *doctor) checkpointVolume(ctx context.Context) result {
	r := result{Check: "Checkpoint volume"}
	c, err := mpi.ParseCheckpoint(d.Checkpoint, mpi.DefaultSSHPath)
	if err != nil {
		r.Status, r.Message = fail, fmt.Sprintf("--checkpoint-volume %q: %s", d.Checkpoint, mpi.CheckpointProblems(err))
		r.Fix = "name a PersistentVolumeClaim of the namespace, and a directory for it: CLAIM or CLAIM:/path"
		return r
	}
	var pvc corev1.PersistentVolumeClaim
	found := &pvc
	switch err := d.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: c.Claim}, &pvc); {
	case apierrors.IsNotFound(err):
		found = nil
	case err != nil:
		r.Status, r.Message = warn, fmt.Sprintf("cannot read PersistentVolumeClaim %s: %s", c.Claim, firstLine(err))
		r.Fix = "admission reads the claim with the operator's rights: ask your admin whether it can be used"
		return r
	}
	if refusal := c.Refusal(found); refusal != "" {
		r.Status, r.Message = fail, refusal
		r.Fix = fmt.Sprintf("a job with --checkpoint-volume %s in namespace %s would be refused until this is fixed", d.Checkpoint, d.Namespace)
		return r
	}
	r.Status = pass
	r.Message = fmt.Sprintf("PersistentVolumeClaim %s is ReadWriteMany: every rank of a job in %s finds it at %s ($%s)", c.Claim, d.Namespace, c.Dir, mpi.EnvCheckpointDir)
	if pvc.Status.Phase != corev1.ClaimBound {
		r.Status = warn
		r.Message = fmt.Sprintf("PersistentVolumeClaim %s is ReadWriteMany but %s: a job's pods wait until it is bound", c.Claim, pvc.Status.Phase)
		r.Fix = fmt.Sprintf("kubectl describe pvc %s -n %s says what it waits for (a volume, its storage class's provisioner)", c.Claim, d.Namespace)
	}
	return r
}

// networkPreflight runs, for one profile, the checks the operator makes
// before it lets a job with that profile start (mpi.PlanNetworks and
// mpi.NodeProblems): the NADs exist in the job's namespace and name a
// device resource, and some node offers it.
func (d *doctor) networkPreflight(ctx context.Context) result {
	r := result{Check: "Network " + d.Network}
	var p torusv1alpha1.MPINetworkProfile
	if err := d.Client.Get(ctx, client.ObjectKey{Name: d.Network}, &p); err != nil {
		r.Status, r.Message = fail, fmt.Sprintf("MPINetworkProfile %q: %s", d.Network, firstLine(err))
		r.Fix = "kubectl get mpinetworkprofiles lists the profiles; ask your admin for one (docs/admins/networks.md)"
		return r
	}
	impl := d.Implementation
	if impl == "" {
		impl = mpi.OpenMPI
	}
	getNAD := func(ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
		var nad nadv1.NetworkAttachmentDefinition
		err := d.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &nad)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return &nad, err
	}
	plan, problems, err := mpi.PlanNetworks(&p, d.Namespace, impl, getNAD)
	if err != nil {
		r.Status, r.Message = fail, firstLine(err)
		r.Fix = "install Multus (the NetworkAttachmentDefinition API), or check your permission to read NetworkAttachmentDefinitions"
		return r
	}
	if len(problems) == 0 {
		var nodes corev1.NodeList
		if err := d.Client.List(ctx, &nodes); err != nil {
			r.Status, r.Message = warn, "cannot list nodes to check the device resources: "+firstLine(err)
			return r
		}
		problems = mpi.NodeProblems(plan, nodes.Items)
	}
	if len(problems) > 0 {
		r.Status, r.Message = fail, strings.Join(problems, "; ")
		r.Fix = "a job with --network " + d.Network + " in namespace " + d.Namespace + " would not start until this is fixed"
		return r
	}
	var res []string
	for name, q := range plan.Resources() {
		res = append(res, q.String()+" "+string(name))
	}
	sort.Strings(res)
	r.Status, r.Message = pass, fmt.Sprintf("jobs in %s can use it: each rank pod gets %d network(s) and %s", d.Namespace, len(plan.Networks), strings.Join(res, ", "))
	if needs := mpi.PodSecurityNeeds(plan.Capabilities); needs != "" {
		r.Message += "; " + needs
		if level := d.podSecurityLevel(ctx); level != "privileged" {
			r.Status = warn
			r.Fix = fmt.Sprintf("namespace %s enforces Pod Security level %q: ask your admin to allow the profile's capabilities there", d.Namespace, level)
		}
	}
	return r
}

// podSecurityLevel is the Pod Security level the namespace enforces
// ("privileged" when it sets none, as the API server's default; "unknown"
// when the namespace cannot be read).
func (d *doctor) podSecurityLevel(ctx context.Context) string {
	var ns corev1.Namespace
	if err := d.Client.Get(ctx, client.ObjectKey{Name: d.Namespace}, &ns); err != nil {
		return "unknown"
	}
	if level := ns.Labels["pod-security.kubernetes.io/enforce"]; level != "" {
		return level
	}
	return "privileged"
}

// failed reports whether any check failed.
func failed(rs []result) bool {
	for _, r := range rs {
		if r.Status == fail {
			return true
		}
	}
	return false
}

func (d *doctor) apiServer() result {
	r := result{Check: "API server"}
	v, err := d.Discovery.ServerVersion()
	if err != nil {
		r.Status, r.Message = fail, err.Error()
		r.Fix = "check the kubeconfig (--kubeconfig, --context) and that the cluster is up: kubectl cluster-info"
		return r
	}
	r.Status, r.Message = pass, "Kubernetes "+v.GitVersion
	groups, err := d.Discovery.ServerGroups()
	if err != nil {
		r.Status, r.Message = fail, "listing the API groups: "+err.Error()
		return r
	}
	d.groups = map[string]bool{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			d.groups[v.GroupVersion] = true
		}
	}
	return r
}

// apis checks the API groups Torus works with.
func (d *doctor) apis() []result {
	type want struct {
		check, gv, purpose, fix string
		missing                 status
	}
	wants := []want{
		{"Trainer CRDs", trainer.GroupVersion.String(), "TrainJob, TrainingRuntime and ClusterTrainingRuntime",
			"install Torus (its bundle ships the Trainer CRDs): see the Torus README", fail},
		{"Torus CRDs", torusv1alpha1.GroupVersion.String(), "MPINetworkProfile (InfiniBand/RoCE profiles)",
			"install Torus's CRDs (kustomize/crd/torus) to use --network", warn},
		{"JobSet", "jobset.x-k8s.io/v1alpha2", "JobSet, which runs every MPI job's pods",
			"install JobSet v0.12 (https://jobset.sigs.k8s.io), which the operator needs", fail},
		{"Kueue", "kueue.x-k8s.io/v1beta2", "Kueue, which admits a job's pods all at once",
			"install Kueue v0.19 for gang scheduling and quotas; without it jobs start as soon as they are created", warn},
	}
	var out []result
	for _, w := range wants {
		if d.groups[w.gv] {
			out = append(out, result{Check: w.check, Status: pass, Message: w.gv + " served: " + w.purpose})
			continue
		}
		out = append(out, result{Check: w.check, Status: w.missing, Message: w.gv + " is not served", Fix: w.fix})
	}
	return out
}

// operator checks the operator's leader-election lease: a replica that
// renews it is running and reconciling. It comes first among Torus's
// checks: without the operator no job gets pods, whatever else is right.
func (d *doctor) operator(ctx context.Context) result {
	r := result{Check: "Torus operator"}
	st := operatorstatus.Check(ctx, d.Client, d.Now())
	switch {
	case st.Running:
		r.Status = pass
		r.Message = fmt.Sprintf("running: %s leads (lease %s/%s renewed %s ago)", st.Holder, st.Namespace, leaseName, st.Age.Round(time.Second))
	case st.Known, st.NeverRan:
		r.Status, r.Message, r.Fix = fail, st.Message(), st.Fix()
	default:
		r.Status, r.Message = warn, "cannot read the operator's leader lease: "+firstLine(st.Err)
		r.Fix = st.Fix()
	}
	return r
}

// webhooks sends a TrainJob for a runtime that does not exist through a
// server-side dry run: Torus's validating webhook must refuse it in its
// own words.
func (d *doctor) webhooks(ctx context.Context) result {
	r := result{Check: "Torus webhooks"}
	if !d.groups[trainer.GroupVersion.String()] {
		r.Status, r.Message = fail, "not checked: the Trainer API is not served"
		r.Fix = "install Torus"
		return r
	}
	probe := mpi.NewTrainJob("torus-doctor-probe", d.Namespace)
	probe.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torus-doctor-no-such-runtime", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	err := d.Client.Create(ctx, probe, client.DryRunAll)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case err == nil:
		r.Status, r.Message = fail, "a TrainJob for a missing runtime was accepted: Torus's webhooks are not registered, so jobs are neither validated nor labelled as MPI jobs"
		r.Fix = "install the operator's webhook configurations (kustomize/webhook) with its serving certificate"
	case apierrors.IsForbidden(err) && !strings.Contains(msg, "admission webhook"):
		r.Status, r.Message = warn, "not checked: you may not create TrainJobs in "+d.Namespace
		r.Fix = "ask for the permission to create trainjobs.trainer.kubeflow.org in this namespace"
	case strings.Contains(msg, "failed calling webhook"):
		r.Status, r.Message = fail, "the API server cannot reach Torus's webhook: "+firstLine(err)
		r.Fix = "check the operator's pods, its webhook Service and certificate; until then no TrainJob can be created"
	case strings.Contains(msg, "vtrainjob.torus-mpi.io") || strings.Contains(msg, "torus-doctor-no-such-runtime"):
		r.Status, r.Message = pass, "answering: a dry-run TrainJob for a missing runtime was refused with Torus's message"
	default:
		r.Status, r.Message = warn, "unexpected answer to a dry-run TrainJob: "+firstLine(err)
		r.Fix = "another admission webhook may handle TrainJobs (the upstream Trainer controller?): Torus and upstream Trainer must not both run"
	}
	return r
}

// runtimes checks Torus's ClusterTrainingRuntimes, which run picks from
// --mpi.
func (d *doctor) runtimes(ctx context.Context) result {
	r := result{Check: "MPI runtimes"}
	var list trainer.ClusterTrainingRuntimeList
	if err := d.Client.List(ctx, &list); err != nil {
		r.Status, r.Message = warn, "cannot list ClusterTrainingRuntimes: "+firstLine(err)
		r.Fix = "ask for read access to clustertrainingruntimes.trainer.kubeflow.org"
		return r
	}
	byName := map[string]*trainer.ClusterTrainingRuntime{}
	var mpiRuntimes []string
	for i := range list.Items {
		rt := &list.Items[i]
		byName[rt.Name] = rt
		if rt.Spec.MLPolicy != nil && rt.Spec.MLPolicy.MPI != nil {
			mpiRuntimes = append(mpiRuntimes, rt.Name)
		}
	}
	var missing, wrong []string
	for _, impl := range mpi.Implementations {
		rt, ok := byName[impl.RuntimeName()]
		if !ok {
			missing = append(missing, impl.RuntimeName()+" (--mpi "+impl.CLIName()+")")
			continue
		}
		// run picks it for --mpi: it must run that implementation.
		var got mpi.Implementation
		var err error
		if rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.MPI == nil {
			err = errors.New("it is not an MPI runtime")
		} else if got, err = mpi.ResolveImplementation(ptr.Deref(rt.Spec.MLPolicy.MPI.MPIImplementation, ""), rt.Annotations); err == nil && got != impl {
			err = fmt.Errorf("it runs %s", got.CLIName())
		}
		if err != nil {
			wrong = append(wrong, fmt.Sprintf("%s: %v, but kubectl mpi run --mpi %s uses it", rt.Name, err, impl.CLIName()))
		}
	}
	sort.Strings(mpiRuntimes)
	const reinstall = "the operator installs Torus's runtimes when it starts: restart it, and check that it does not run with --install-default-runtimes=false"
	switch {
	case len(wrong) > 0:
		r.Status, r.Message = fail, strings.Join(wrong, "; ")
		r.Fix = "delete the runtime; " + reinstall
	case len(missing) == len(mpi.Implementations):
		r.Status, r.Message = warn, "none of Torus's runtimes is installed; MPI runtimes: "+orNone(mpiRuntimes)
		r.Fix = reinstall + " (or name a runtime with kubectl mpi run --runtime)"
	case len(missing) > 0:
		r.Status, r.Message = warn, "missing "+strings.Join(missing, ", ")
		r.Fix = reinstall
	default:
		r.Status, r.Message = pass, "MPI runtimes: "+strings.Join(mpiRuntimes, ", ")
	}
	return r
}

// permissions asks what the user may do in the namespace, command by
// command.
func (d *doctor) permissions(ctx context.Context) result {
	r := result{Check: "Permissions"}
	type need struct {
		verb, group, resource, sub, commands string
	}
	needs := []need{
		{"create", trainer.GroupVersion.Group, "trainjobs", "", "run, rerun"},
		{"list", trainer.GroupVersion.Group, "trainjobs", "", "list, describe, wait"},
		{"delete", trainer.GroupVersion.Group, "trainjobs", "", "delete"},
		{"list", "", "pods", "", "describe, logs, top, exec-rank"},
		{"get", "", "pods", "log", "logs"},
		{"create", "", "pods", "exec", "exec-rank"},
		{"list", "", "events", "", "describe"},
	}
	var denied []string
	for _, n := range needs {
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: d.Namespace, Verb: n.verb, Group: n.group, Resource: n.resource, Subresource: n.sub,
			},
		}}
		if err := d.Client.Create(ctx, ssar); err != nil {
			r.Status, r.Message = warn, "cannot ask the API server what you may do: "+firstLine(err)
			return r
		}
		if !ssar.Status.Allowed {
			res := n.resource
			if n.sub != "" {
				res += "/" + n.sub
			}
			denied = append(denied, fmt.Sprintf("%s %s (kubectl mpi %s)", n.verb, res, n.commands))
		}
	}
	if len(denied) == 0 {
		r.Status, r.Message = pass, "you may run, inspect, debug and delete MPI jobs in namespace "+d.Namespace
		return r
	}
	r.Status = warn
	if len(denied) == len(needs) {
		r.Status = fail
	}
	r.Message = "in namespace " + d.Namespace + " you may not " + strings.Join(denied, "; ")
	r.Fix = "ask your cluster admin for a Role with these verbs in this namespace"
	return r
}

// queues lists the LocalQueues the user may submit to.
func (d *doctor) queues(ctx context.Context) result {
	r := result{Check: "Kueue queues"}
	if !d.groups["kueue.x-k8s.io/v1beta2"] {
		r.Status, r.Message = warn, "Kueue is not installed: jobs are not gang-scheduled"
		r.Fix = "install Kueue v0.19 and create a ClusterQueue and LocalQueues"
		return r
	}
	var list kueue.LocalQueueList
	if err := d.Client.List(ctx, &list, client.InNamespace(d.Namespace)); err != nil {
		r.Status, r.Message = warn, "cannot list LocalQueues: "+firstLine(err)
		return r
	}
	if len(list.Items) == 0 {
		r.Status, r.Message = warn, "no LocalQueue in namespace "+d.Namespace+": jobs run without --queue, outside Kueue's quotas and gang scheduling"
		r.Fix = "ask your cluster admin for a LocalQueue in this namespace, then run with --queue NAME"
		return r
	}
	var ok, broken []string
	for _, q := range list.Items {
		c := meta.FindStatusCondition(q.Status.Conditions, kueue.LocalQueueActive)
		if c != nil && c.Status == metav1.ConditionFalse {
			broken = append(broken, fmt.Sprintf("%s (ClusterQueue %s: %s)", q.Name, q.Spec.ClusterQueue, c.Message))
			continue
		}
		ok = append(ok, fmt.Sprintf("%s (ClusterQueue %s)", q.Name, q.Spec.ClusterQueue))
	}
	switch {
	case len(broken) > 0 && len(ok) == 0:
		r.Status, r.Message = fail, "no LocalQueue is active: "+strings.Join(broken, "; ")
		r.Fix = "ask your cluster admin to fix the ClusterQueues (kubectl describe clusterqueue)"
	case len(broken) > 0:
		r.Status, r.Message = warn, "use --queue with "+strings.Join(ok, ", ")+"; inactive: "+strings.Join(broken, "; ")
		r.Fix = "ask your cluster admin about the inactive queues"
	default:
		r.Status, r.Message = pass, "use --queue with "+strings.Join(ok, ", ")
	}
	return r
}

var nadGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// networkProfiles checks each MPINetworkProfile and the
// NetworkAttachmentDefinitions it attaches.
func (d *doctor) networkProfiles(ctx context.Context) result {
	r := result{Check: "Network profiles"}
	if !d.groups[torusv1alpha1.GroupVersion.String()] {
		r.Status, r.Message = warn, "the MPINetworkProfile API is not installed: --network is not available"
		r.Fix = "install Torus's CRDs to run over InfiniBand or RoCE"
		return r
	}
	var list torusv1alpha1.MPINetworkProfileList
	if err := d.Client.List(ctx, &list); err != nil {
		r.Status, r.Message = warn, "cannot list MPINetworkProfiles: "+firstLine(err)
		return r
	}
	if len(list.Items) == 0 {
		r.Status, r.Message = pass, "no MPINetworkProfile: jobs use the pod network (fine for TCP; InfiniBand/RoCE needs a profile)"
		return r
	}
	multus := d.groups[nadGVR.GroupVersion().String()]
	var good, bad []string
	for _, p := range list.Items {
		var problems []string
		for _, n := range p.Spec.Networks {
			ns := n.Namespace
			if ns == "" {
				ns = d.Namespace
			}
			if !multus {
				problems = append(problems, "Multus is not installed (no NetworkAttachmentDefinition API)")
				break
			}
			nad := &unstructured.Unstructured{}
			nad.SetGroupVersionKind(nadGVR.GroupVersion().WithKind("NetworkAttachmentDefinition"))
			err := d.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.Name}, nad)
			switch {
			case apierrors.IsNotFound(err):
				problems = append(problems, fmt.Sprintf("NetworkAttachmentDefinition %s/%s not found", ns, n.Name))
			case err != nil && !apierrors.IsForbidden(err):
				problems = append(problems, fmt.Sprintf("NetworkAttachmentDefinition %s/%s: %s", ns, n.Name, firstLine(err)))
			}
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse && len(problems) == 0 {
			problems = append(problems, c.Message)
		}
		if len(problems) > 0 {
			bad = append(bad, p.Name+": "+strings.Join(problems, "; "))
		} else {
			good = append(good, p.Name)
		}
	}
	if len(bad) > 0 {
		r.Status, r.Message = fail, strings.Join(bad, " | ")
		r.Fix = "create the NetworkAttachmentDefinitions (SR-IOV or Multus) the profiles name, in the jobs' namespaces, or fix the profiles"
		if len(good) > 0 {
			r.Message += " (ready: " + strings.Join(good, ", ") + ")"
		}
		return r
	}
	r.Status, r.Message = pass, "ready for --network: "+strings.Join(good, ", ")
	return r
}

// gpus sums the GPUs nodes offer.
// gpuNodeLabels mark a node as having GPUs whatever its resources say:
// NVIDIA's GPU feature discovery's, and Node Feature Discovery's for the
// PCI vendors of NVIDIA and AMD. Such a node without a GPU resource has no
// device plugin serving its GPUs.
var gpuNodeLabels = []string{"nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-1002.present"}

// gpuNodesShown bounds the nodes the GPU check names.
const gpuNodesShown = 8

// gpus reports the GPU nodes: what each offers, and those whose GPUs no
// device plugin serves.
func (d *doctor) gpus(ctx context.Context) result {
	r := result{Check: "GPUs"}
	var nodes corev1.NodeList
	if err := d.Client.List(ctx, &nodes); err != nil {
		r.Status, r.Message = warn, "cannot list nodes: "+firstLine(err)
		r.Fix = "ask your cluster admin how many GPUs the cluster has"
		return r
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	byResource := map[corev1.ResourceName]*resource.Quantity{}
	var offering, unserved, unhealthy []string
	for _, n := range nodes.Items {
		var offers []string
		for _, name := range slices.Sorted(maps.Keys(n.Status.Allocatable)) {
			q := n.Status.Allocatable[name]
			if !mpi.IsGPU(name) || q.IsZero() {
				continue
			}
			if byResource[name] == nil {
				byResource[name] = &resource.Quantity{}
			}
			byResource[name].Add(q)
			offers = append(offers, q.String()+" "+string(name))
		}
		switch {
		case len(offers) > 0:
			offering = append(offering, n.Name+" ("+strings.Join(offers, ", ")+")")
		case mpi.GPUs(n.Status.Capacity) > 0:
			unhealthy = append(unhealthy, n.Name)
		case gpuLabelled(&n):
			unserved = append(unserved, n.Name)
		}
	}
	var problems, fixes []string
	if len(unserved) > 0 {
		problems = append(problems, fmt.Sprintf("%s labelled as having GPUs but offering none: no device plugin serves them", names(unserved)))
		fixes = append(fixes, "run the GPU operator or device plugin of those GPUs on "+names(unserved))
	}
	if len(unhealthy) > 0 {
		problems = append(problems, fmt.Sprintf("%s having GPUs but none allocatable: the device plugin reports them unhealthy", names(unhealthy)))
		fixes = append(fixes, "see the device plugin's log on "+names(unhealthy))
	}
	if len(byResource) == 0 && len(problems) == 0 {
		r.Status, r.Message = warn, fmt.Sprintf("no node of %d offers GPUs: --gpus jobs will not schedule", len(nodes.Items))
		r.Fix = "install the GPU operator or device plugin of your GPUs, or run CPU-only jobs"
		return r
	}
	var parts []string
	for name, q := range byResource {
		parts = append(parts, fmt.Sprintf("%s %s", q.String(), name))
	}
	sort.Strings(parts)
	r.Status = pass
	if len(parts) > 0 {
		r.Message = fmt.Sprintf("%s allocatable on %d of %d nodes: %s", strings.Join(parts, ", "), len(offering), len(nodes.Items), names(offering))
	} else {
		r.Message = fmt.Sprintf("no node of %d offers GPUs", len(nodes.Items))
	}
	if len(problems) > 0 {
		r.Status, r.Message, r.Fix = warn, r.Message+"; "+strings.Join(problems, "; "), strings.Join(fixes, "; ")
	}
	return r
}

// gpuLabelled reports whether a node's labels say it has GPUs.
func gpuLabelled(n *corev1.Node) bool {
	for _, l := range gpuNodeLabels {
		if n.Labels[l] == "true" {
			return true
		}
	}
	return false
}

// names lists nodes, the first gpuNodesShown of them.
func names(nodes []string) string {
	if len(nodes) <= gpuNodesShown {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:gpuNodesShown], ", "), len(nodes)-gpuNodesShown)
}

func firstLine(err error) string {
	var se *apierrors.StatusError
	msg := err.Error()
	if errors.As(err, &se) {
		msg = se.ErrStatus.Message
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
