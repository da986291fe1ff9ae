package cluster

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// The Kubeflow Python SDK (the kubeflow package, 0.5.0: kubeflow/sdk at
// 776163f, "Prepare Release 0.5.0") cannot run here: no Python registry is
// reachable. sdk is what its Kubernetes backend asks of the cluster, call
// by call, made by this test in Go: the same requests (verbs, selectors,
// names) and the same reading of the answers, so that a change of Torus's
// that would break a notebook fails here. Each function names the SDK file
// and function it follows:
//
//	B  kubeflow/trainer/backends/kubernetes/backend.py (KubernetesBackend)
//	U  kubeflow/trainer/backends/kubernetes/utils.py
//	C  kubeflow/trainer/constants/constants.py
type sdk struct {
	dyn       dynamic.Interface
	core      kubernetes.Interface
	namespace string
}

var (
	sdkTrainJobs       = trainer.GroupVersion.WithResource("trainjobs")
	sdkRuntimes        = trainer.GroupVersion.WithResource("trainingruntimes")
	sdkClusterRuntimes = trainer.GroupVersion.WithResource("clustertrainingruntimes")
)

// Names and labels the SDK reads (C).
const (
	sdkFrameworkLabel = "trainer.kubeflow.org/framework"
	sdkAncestorLabel  = "trainer.kubeflow.org/trainjob-ancestor-step"
	sdkNodeContainer  = "node"
	sdkCompletionIdx  = "batch.kubernetes.io/job-completion-index"
	sdkRJobLabel      = "jobset.sigs.k8s.io/replicatedjob-name"
	// sdkPodSelector is C's POD_LABEL_SELECTOR.
	sdkPodSelector = "jobset.sigs.k8s.io/jobset-name=%s,jobset.sigs.k8s.io/replicatedjob-name in (dataset-initializer, model-initializer, launcher, node)"
	// sdkMPIUserHome is C's DEFAULT_MPI_USER_HOME.
	sdkMPIUserHome = "/home/mpiuser"
	// sdkPatchManager is the manager of every RuntimePatch the SDK writes
	// (kubeflow/trainer/options/kubernetes.py, RuntimePatch).
	sdkPatchManager = "trainer.kubeflow.org/kubeflow-sdk"
)

func newSDK(dir, namespace string) *sdk {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	return &sdk{dyn: dynamic.NewForConfigOrDie(cfg), core: kubernetes.NewForConfigOrDie(cfg), namespace: namespace}
}

// sdkRuntime is B's Runtime: what __get_runtime_from_cr and
// U.get_runtime_trainer read from a (Cluster)TrainingRuntime.
type sdkRuntime struct {
	Name, Kind, Framework, Image, Device string
	NumNodes                             int32
	// Command is the command a CustomTrainer's function is wrapped in
	// (U.get_runtime_trainer): for an MPI runtime, C's MPI_COMMAND.
	Command []string
}

// sdkMPICommand is C's MPI_COMMAND: mpirun on the runtime's hostfile,
// without -np, starting bash -c with EXEC_FUNC_SCRIPT on every rank.
var sdkMPICommand = []string{"mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c",
	"\nread -r -d '' SCRIPT << EOM\n\n{func_code}\nEOM\nprintf \"%s\" \"$SCRIPT\" > \"{func_file}\"\npython \"{func_file}\""}

// parseRuntime is B.__get_runtime_from_cr with U.get_runtime_trainer and
// U.get_container_devices: each error is one the SDK raises, which fails
// list_runtimes as a whole.
func parseRuntime(obj *unstructured.Unstructured) (*sdkRuntime, error) {
	var spec trainer.TrainingRuntimeSpec
	raw, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, fmt.Errorf("runtime %s: %w", obj.GetName(), err)
	}
	framework, ok := obj.GetLabels()[sdkFrameworkLabel]
	if !ok {
		return nil, fmt.Errorf("runtime %s has no %s label", obj.GetName(), sdkFrameworkLabel)
	}
	if spec.MLPolicy == nil || len(spec.Template.Spec.ReplicatedJobs) == 0 {
		return nil, fmt.Errorf("runtime %s has no mlPolicy or no replicatedJobs", obj.GetName())
	}
	if obj.GetKind() != trainer.ClusterTrainingRuntimeKind && obj.GetKind() != trainer.TrainingRuntimeKind {
		return nil, fmt.Errorf("runtime %s is of kind %q", obj.GetName(), obj.GetKind())
	}
	var node *corev1.Container
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		// The ancestor label is read from the Job template's labels.
		if _, ok := rj.Template.Labels[sdkAncestorLabel]; !ok {
			continue
		}
		for i, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name == sdkNodeContainer {
				node = &rj.Template.Spec.Template.Spec.Containers[i]
			}
		}
		break
	}
	if node == nil || node.Image == "" {
		return nil, fmt.Errorf("runtime %s has no container %q with an image in the replicated job labelled %s", obj.GetName(), sdkNodeContainer, sdkAncestorLabel)
	}
	device, err := sdkDevice(node.Resources.Limits)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", obj.GetName(), err)
	}
	rt := &sdkRuntime{Name: obj.GetName(), Kind: obj.GetKind(), Framework: framework, Image: node.Image, Device: device, NumNodes: 1}
	if spec.MLPolicy.NumNodes != nil {
		rt.NumNodes = *spec.MLPolicy.NumNodes
	}
	switch {
	case framework == "torchtune":
		rt.Command = []string{"tune", "run"}
	case spec.MLPolicy.Torch != nil:
		rt.Command = []string{"bash", "-c", "torchrun"}
	case spec.MLPolicy.MPI != nil:
		rt.Command = sdkMPICommand
	default:
		rt.Command = []string{"bash", "-c", "python"}
	}
	return rt, nil
}

// sdkDevice is U.get_container_devices: the first of its known resources
// among the limits, and an error for limits of none of them.
func sdkDevice(limits corev1.ResourceList) (string, error) {
	if len(limits) == 0 {
		return "Unknown", nil
	}
	for _, k := range []corev1.ResourceName{"nvidia.com/gpu", "google.com/tpu"} {
		if _, ok := limits[k]; ok {
			return map[corev1.ResourceName]string{"nvidia.com/gpu": "gpu", "google.com/tpu": "tpu"}[k], nil
		}
	}
	var mig []string
	for k := range limits {
		if strings.HasPrefix(string(k), "nvidia.com/mig-") {
			mig = append(mig, string(k))
		}
	}
	switch {
	case len(mig) > 1:
		return "", fmt.Errorf("more than one MIG profile in the limits: %v", mig)
	case len(mig) == 1:
		return mig[0], nil
	}
	if _, ok := limits["huawei.com/Ascend910"]; ok {
		return "npu", nil
	}
	if _, ok := limits[corev1.ResourceCPU]; ok {
		return "cpu", nil
	}
	return "", fmt.Errorf("limits %v hold no device the SDK knows", limits)
}

// listRuntimes is B.list_runtimes: the cluster's and the namespace's
// runtimes, the namespace's winning by name; one without the framework
// label is skipped, one that does not parse fails the call.
func (s *sdk) listRuntimes(ctx context.Context) (map[string]*sdkRuntime, error) {
	cluster, err := s.dyn.Resource(sdkClusterRuntimes).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	namespaced, err := s.dyn.Resource(sdkRuntimes).Namespace(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*sdkRuntime{}
	for _, list := range []*unstructured.UnstructuredList{namespaced, cluster} {
		for i := range list.Items {
			obj := &list.Items[i]
			if _, ok := obj.GetLabels()[sdkFrameworkLabel]; !ok {
				continue
			}
			if _, ok := out[obj.GetName()]; ok {
				continue
			}
			// A LIST's items carry no kind; the SDK's client sets it from
			// the list's.
			obj.SetKind(strings.TrimSuffix(list.GetKind(), "List"))
			rt, err := parseRuntime(obj)
			if err != nil {
				return nil, err
			}
			out[rt.Name] = rt
		}
	}
	return out, nil
}

// getRuntime is B.get_runtime: the namespace's runtime of that name, else
// the cluster's.
func (s *sdk) getRuntime(ctx context.Context, name string) (*sdkRuntime, error) {
	obj, err := s.dyn.Resource(sdkRuntimes).Namespace(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj, err = s.dyn.Resource(sdkClusterRuntimes).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return parseRuntime(obj)
}

// trainFunc is what U.get_command_using_train_func makes of a function on
// an MPI runtime: its source and call written under the MPI user's home on
// every rank, then run with python.
func trainFunc(rt *sdkRuntime, source, call, file string) []string {
	code := source + "\n" + call + "\n"
	path := sdkMPIUserHome + "/" + file
	cmd := make([]string, len(rt.Command))
	for i, c := range rt.Command {
		if strings.Contains(c, "{func_file}") {
			c = strings.NewReplacer("{func_code}", code, "{func_file}", path).Replace(c)
		}
		cmd[i] = c
	}
	return cmd
}

// sdkStep is B's Step.
type sdkStep struct{ Name, Status, Pod, Device string }

// sdkJob is B's TrainJob.
type sdkJob struct {
	Status string
	Steps  []sdkStep
}

// getJob is B.get_job (__get_trainjob_from_cr): the TrainJob, its runtime
// (which must still parse), its pods by the SDK's selector, a step per
// pod, and the status from the conditions, or from the pods when the
// TrainJob has none.
func (s *sdk) getJob(ctx context.Context, name string) (*sdkJob, error) {
	obj, err := s.dyn.Resource(sdkTrainJobs).Namespace(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var tj trainer.TrainJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &tj); err != nil {
		return nil, err
	}
	rt, err := s.getRuntime(ctx, tj.Spec.RuntimeRef.Name)
	if err != nil {
		return nil, fmt.Errorf("the job's runtime: %w", err)
	}
	numNodes := rt.NumNodes
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil && *tj.Spec.Trainer.NumNodes != 0 {
		numNodes = *tj.Spec.Trainer.NumNodes
	}
	pods, err := s.core.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf(sdkPodSelector, name)})
	if err != nil {
		return nil, err
	}
	job := &sdkJob{Status: "Created"}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		role := p.Labels[sdkRJobLabel]
		if role != "launcher" && role != "node" {
			continue
		}
		idx, ok := p.Labels[sdkCompletionIdx]
		if !ok {
			return nil, fmt.Errorf("pod %s has no %s label", p.Name, sdkCompletionIdx)
		}
		key := role + "-" + idx
		if seen[key] {
			continue
		}
		seen[key] = true
		i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == sdkNodeContainer })
		if i < 0 {
			return nil, fmt.Errorf("pod %s has no container %q", p.Name, sdkNodeContainer)
		}
		device, err := sdkDevice(p.Spec.Containers[i].Resources.Limits)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		// U.get_trainjob_node_step: on an MPI runtime the launcher is
		// node-0 and the workers node-1 onwards.
		var n int
		if _, err := fmt.Sscan(idx, &n); err != nil {
			return nil, fmt.Errorf("pod %s: completion index %q: %w", p.Name, idx, err)
		}
		if rt.Command[0] == "mpirun" && role != "launcher" {
			n++
		}
		job.Steps = append(job.Steps, sdkStep{Name: fmt.Sprintf("node-%d", n), Status: string(p.Status.Phase), Pod: p.Name, Device: device})
	}
	if len(tj.Status.Conditions) > 0 {
		for _, c := range tj.Status.Conditions {
			// The SDK's model of a condition requires each of these.
			if c.Type == "" || c.Status == "" || c.Reason == "" || c.LastTransitionTime.IsZero() {
				return nil, fmt.Errorf("condition %+v lacks a field the SDK requires", c)
			}
			if (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) && c.Status == metav1.ConditionTrue {
				job.Status = c.Type
			}
		}
	} else {
		var running int32
		for _, st := range job.Steps {
			if strings.HasPrefix(st.Name, "node") && (st.Status == string(corev1.PodRunning) || st.Status == string(corev1.PodSucceeded)) {
				running++
			}
		}
		if running == numNodes {
			job.Status = "Running"
		}
	}
	return job, nil
}

// followLogs is B.get_job_logs(name, step, follow=True): the step's pod,
// once it is past Pending, its container named for the step (node), read
// with follow until the container ends.
func (s *sdk) followLogs(ctx context.Context, pod string) (string, error) {
	stream, err := s.core.CoreV1().Pods(s.namespace).GetLogs(pod, &corev1.PodLogOptions{Container: sdkNodeContainer, Follow: true}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = stream.Close() }()
	var b strings.Builder
	sc := bufio.NewScanner(stream)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String(), sc.Err()
}

// sdkEvent is B's Event.
type sdkEvent struct{ Kind, Name, Reason, Message string }

// jobEvents is B.get_job_events: every core/v1 Event of the namespace,
// kept when it has a firstTimestamp and is about the TrainJob, its JobSet,
// a Job or a pod of its steps, by name.
func (s *sdk) jobEvents(ctx context.Context, name string, job *sdkJob) ([]sdkEvent, error) {
	names := map[string]bool{name: true}
	for _, st := range job.Steps {
		names[st.Name], names[st.Pod] = true, true
	}
	list, err := s.core.CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []sdkEvent
	for _, e := range list.Items {
		if e.FirstTimestamp.IsZero() || !slices.Contains([]string{"TrainJob", "JobSet", "Job", "Pod"}, e.InvolvedObject.Kind) || !names[e.InvolvedObject.Name] {
			continue
		}
		out = append(out, sdkEvent{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name, Reason: e.Reason, Message: e.Message})
	}
	return out, nil
}

// realNodeSDK runs a notebook's session with the Kubeflow SDK's
// TrainerClient against Torus on the real nodes: list and get the
// runtimes, train a Python function with CustomTrainer on an MPI runtime,
// follow its job's status, steps, logs and events until it completes, and
// delete it.
func realNodeSDK(dirp *string) {
	Context("the Kubeflow Python SDK's TrainerClient, call by call", Ordered, func() {
		var (
			dir string
			s   *sdk
			rt  *sdkRuntime
		)
		const (
			runtimeName = "sdk-python"
			jobName     = "sdk-train"
		)

		BeforeAll(func() {
			dir = *dirp
			// The shipped Python runtime (its image as the real nodes
			// hold it), under a UID the image has no account for, as
			// OpenShift's restricted-v2 assigns one: the function's file
			// goes under /home/mpiuser all the same.
			base := localRuntime(dir, "torus-python-local")
			for i := range base.Spec.Template.Spec.ReplicatedJobs {
				ps := &base.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
				for j := range ps.Containers {
					Expect(ps.Containers[j].Image).To(Equal(mpiImageNoSSH), "torus-python-local runs the reference image without OpenSSH")
					if ps.Containers[j].SecurityContext == nil {
						ps.Containers[j].SecurityContext = &corev1.SecurityContext{}
					}
					ps.Containers[j].SecurityContext.RunAsUser = ptr.To[int64](assignedUID)
				}
			}
			apply(dir, &trainer.TrainingRuntime{
				TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
				ObjectMeta: metav1.ObjectMeta{Name: runtimeName, Namespace: "default", Labels: base.Labels, Annotations: base.Annotations},
				Spec:       base.Spec,
			})
			s = newSDK(dir, "default")
		})

		It("list_runtimes and get_runtime read every runtime the cluster serves, the namespace's first", func(ctx SpecContext) {
			all, err := s.listRuntimes(ctx)
			Expect(err).NotTo(HaveOccurred(), "list_runtimes raises on a runtime the SDK cannot read")
			for _, name := range []string{"torus-openmpi", "torus-openmpi5", "torus-intelmpi", "torus-mpich", "torus-python", "torus-python-local", runtimeName} {
				Expect(all).To(HaveKey(name))
				Expect(all[name].Framework).To(Equal("mpi"), "runtime %s", name)
				Expect(all[name].Command[0]).To(Equal("mpirun"), "the SDK takes runtime %s for MPI by its command", name)
			}
			Expect(all[runtimeName].Kind).To(Equal(trainer.TrainingRuntimeKind))
			Expect(all["torus-openmpi"].Kind).To(Equal(trainer.ClusterTrainingRuntimeKind))

			rt, err = s.getRuntime(ctx, runtimeName)
			Expect(err).NotTo(HaveOccurred())
			Expect(rt.Image).To(Equal(mpiImageNoSSH))
			cluster, err := s.getRuntime(ctx, "torus-python")
			Expect(err).NotTo(HaveOccurred(), "get_runtime falls back to the cluster's runtime of that name")
			Expect(cluster.Kind).To(Equal(trainer.ClusterTrainingRuntimeKind))
			Expect(cluster.Image).To(HavePrefix("ghcr.io/torus-mpi/mpi-python:v"), "the shipped Python runtime names the image released with the operator")
		})

		It("train with CustomTrainer(func=...) runs the function on every rank; get_job, wait_for_job_status, get_job_logs and get_job_events follow it to Complete; delete_job removes it", func(ctx SpecContext) {
			Expect(rt).NotTo(BeNil(), "get_runtime did not run")
			// What a notebook's cell holds: mpi4py and NumPy, as a
			// data scientist writes them.
			source := strings.Join([]string{
				"def train_fn(steps=1):",
				"    import os",
				"    import numpy as np",
				"    from mpi4py import MPI",
				"    comm = MPI.COMM_WORLD",
				"    rank = comm.Get_rank()",
				"    total = comm.allreduce(np.arange(steps, dtype=np.float64) * (rank + 1), op=MPI.SUM)",
				`    print("sdk rank %d of %d uid %d: %s" % (rank, comm.Get_size(), os.getuid(), total.tolist()), flush=True)`,
				"",
			}, "\n")
			command := trainFunc(rt, source, "train_fn(**{'steps': 3})", "sdk_cell.py")

			By("train: the TrainJob B._get_trainjob_spec makes, with the options Labels, Annotations, ActiveDeadlineSeconds and RuntimePatch, created as B.train does")
			tj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": trainer.GroupVersion.String(),
				"kind":       trainer.TrainJobKind,
				"metadata": map[string]any{
					"name":        jobName,
					"labels":      map[string]any{"team": "notebooks"},
					"annotations": map[string]any{"notebook": "digits.ipynb"},
				},
				"spec": map[string]any{
					// No apiGroup: the SDK never sets it.
					"runtimeRef": map[string]any{"name": rt.Name, "kind": rt.Kind},
					"trainer": map[string]any{
						"numNodes": int64(2),
						// U.get_resources_per_node passes the notebook's
						// values as they are: a number here.
						"resourcesPerNode": map[string]any{
							"requests": map[string]any{"cpu": 0.1},
							"limits":   map[string]any{"cpu": 0.1},
						},
						// No image: CustomTrainer(func=...) without one
						// runs the runtime's.
						"command": toAny(command),
						"env":     []any{map[string]any{"name": "SDK_CELL", "value": "1"}},
					},
					"activeDeadlineSeconds": int64(600),
					"runtimePatches": []any{sdkPodPatch("node", map[string]any{
						"metadata": map[string]any{"labels": map[string]any{"patched": "sdk"}},
					})},
				},
			}}
			By("a RuntimePatch of the node container's env is refused, as upstream refuses it, naming what to use instead")
			withEnvPatch := tj.DeepCopy()
			Expect(unstructured.SetNestedSlice(withEnvPatch.Object, []any{sdkPodPatch("node", map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": sdkNodeContainer, "env": []any{map[string]any{"name": "EPOCHS", "value": "3"}}}},
			}})}, "spec", "runtimePatches")).To(Succeed())
			_, err := s.dyn.Resource(sdkTrainJobs).Namespace(s.namespace).Create(ctx, withEnvPatch, metav1.CreateOptions{})
			Expect(err).To(MatchError(ContainSubstring("set it in spec.trainer.env")))

			_, err = s.dyn.Resource(sdkTrainJobs).Namespace(s.namespace).Create(ctx, tj, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "the API server or Torus's admission refused the SDK's TrainJob")
			report := func() string { return jobReport(dir, jobName, nil) }

			By("wait_for_job_status polls get_job: the steps appear with the SDK's names, and the status goes from Created to Complete, never Failed")
			var (
				statuses []string
				launcher string
				logs     = make(chan string, 1)
			)
			Eventually(func(g Gomega) string {
				job, err := s.getJob(ctx, jobName)
				g.Expect(err).NotTo(HaveOccurred(), "get_job raises")
				if len(statuses) == 0 || statuses[len(statuses)-1] != job.Status {
					statuses = append(statuses, job.Status)
				}
				if job.Status == "Failed" {
					StopTrying("the SDK reads the job as Failed:\n" + report()).Now()
				}
				for _, st := range job.Steps {
					g.Expect(st.Name).To(BeElementOf("node-0", "node-1", "node-2"), "step of pod %s", st.Pod)
					// resourcesPerNode sizes the workers, which run the
					// ranks; the launcher runs none and has no limits.
					device := "cpu"
					if st.Name == "node-0" {
						device = "Unknown"
					}
					g.Expect(st.Device).To(Equal(device), "step %s", st.Name)
					// get_job_logs follows the step's pod once it is past
					// Pending: the launcher's, node-0.
					if st.Name == "node-0" && st.Status != string(corev1.PodPending) && launcher == "" {
						launcher = st.Pod
						go func() {
							defer GinkgoRecover()
							out, err := s.followLogs(context.WithoutCancel(ctx), st.Pod)
							if err != nil {
								out += "\nfollowing the logs: " + err.Error()
							}
							logs <- out
						}()
					}
				}
				return job.Status
			}).WithContext(ctx).WithTimeout(4*time.Minute).WithPolling(2*time.Second).Should(Equal("Complete"), func() string { return report() })
			Expect(statuses[0]).To(Equal("Created"))
			Expect(statuses).To(Or(Equal([]string{"Created", "Complete"}), Equal([]string{"Created", "Running", "Complete"})))

			By("get_job_logs(step=node-0, follow=True): the launcher's container node, to its end, with every rank's line")
			var out string
			Eventually(logs).WithTimeout(time.Minute).Should(Receive(&out))
			Expect(out).To(ContainSubstring(fmt.Sprintf("sdk rank 0 of 2 uid %d: [0.0, 3.0, 6.0]", assignedUID)), report)
			Expect(out).To(ContainSubstring(fmt.Sprintf("sdk rank 1 of 2 uid %d: [0.0, 3.0, 6.0]", assignedUID)), report)

			By("get_job_events of the completed job: the kubelet's events of its launcher's pod, which stays, reach the SDK")
			// The kubelet sends its events on its own time: the call is
			// made again until the launcher's start has reached the API.
			Eventually(func(g Gomega) []sdkEvent {
				job, err := s.getJob(ctx, jobName)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(job.Steps).To(ContainElement(HaveField("Pod", launcher)))
				events, err := s.jobEvents(ctx, jobName, job)
				g.Expect(err).NotTo(HaveOccurred())
				return events
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ContainElement(And(
				HaveField("Kind", "Pod"), HaveField("Name", launcher), HaveField("Reason", "Started"))))

			By("the SDK's runtime patch and the trainer's env reached the workers' pod template")
			out, code := kubectl(dir, "get", "jobset", jobName, "-o",
				`jsonpath={.spec.replicatedJobs[?(@.name=="node")].template.spec.template.metadata.labels.patched} {.spec.replicatedJobs[?(@.name=="node")].template.spec.template.spec.containers[?(@.name=="node")].env[?(@.name=="SDK_CELL")].value}`)
			Expect(code).To(Equal(0), out)
			Expect(strings.Fields(out)).To(Equal([]string{"sdk", "1"}), out)

			By("delete_job: a DELETE with no body; the job's pods go with it")
			Expect(s.dyn.Resource(sdkTrainJobs).Namespace(s.namespace).Delete(ctx, jobName, metav1.DeleteOptions{})).To(Succeed())
			Eventually(func() error {
				_, err := s.dyn.Resource(sdkTrainJobs).Namespace(s.namespace).Get(ctx, jobName, metav1.GetOptions{})
				return err
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Satisfy(apierrors.IsNotFound))
			Eventually(func() ([]corev1.Pod, error) {
				pods, err := s.core.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf(sdkPodSelector, jobName)})
				if err != nil {
					return nil, err
				}
				return pods.Items, nil
			}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(BeEmpty())
		})
	})
}

// sdkPodPatch is a RuntimePatch as the SDK writes it (RuntimePatch with
// a ReplicatedJobPatch of the job's pod template, made a dict by
// _patch_to_dict): manager, then the pod template's patch.
func sdkPodPatch(job string, podTemplate map[string]any) map[string]any {
	return map[string]any{
		"manager": sdkPatchManager,
		"trainingRuntimeSpec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{"name": job, "template": map[string]any{"spec": map[string]any{
				"template": podTemplate,
			}}}},
		}}},
	}
}

// toAny is a []string as JSON decodes it.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
