package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

const (
	jobs = 200
	// killsPerPhase: SIGKILLs while the jobs are created, and again while
	// they finish.
	killsPerPhase = 10
)

var _ = Describe("The operator killed with SIGKILL at random moments", func() {
	It("leaves each of 200 jobs with exactly its children, every finished job's keys deleted and every status right", func(sctx SpecContext) {
		ns := fw.NewNamespace(sctx, "chaos").Name
		op := &operatorProcess{dir: GinkgoT().TempDir()}
		DeferCleanup(op.stop)
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 17))
		op.start()
		ensureRuntimes()

		// The JobSet controller's part, which the operator waits for: the
		// first status of each JobSet, moments after it exists, and later
		// its end.
		stopObserving := observeJobSets(ns)
		DeferCleanup(stopObserving)

		By(fmt.Sprintf("creating %d TrainJobs while the operator is killed %d times", jobs, killsPerPhase))
		var refused atomic.Int64
		created := run(func() { createAll(ns, jobs, 20*time.Millisecond, &refused) })
		killWhile(op, rng, created)
		Eventually(func(g Gomega) {
			var list jobsetv1alpha2.JobSetList
			g.Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(jobs))
			var secrets corev1.SecretList
			g.Expect(fw.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{api.LabelJobName})).To(Succeed())
			g.Expect(secrets.Items).To(HaveLen(jobs))
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "every job gets its JobSet and keys")
		GinkgoWriter.Printf("creations refused while the webhook was down: %d\n", refused.Load())

		By(fmt.Sprintf("finishing them while the operator is killed %d more times", killsPerPhase))
		finished := run(func() {
			var list jobsetv1alpha2.JobSetList
			Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			order := rng.Perm(len(list.Items))
			for _, i := range order {
				complete(client.ObjectKeyFromObject(&list.Items[i]))
				time.Sleep(40 * time.Millisecond)
			}
		})
		killWhile(op, rng, finished)
		Eventually(allFinished(ns, jobs), 2*time.Minute, 200*time.Millisecond).Should(Succeed())

		By("every job: exactly one JobSet, owned by it; nothing owned by no job")
		var tjs trainer.TrainJobList
		Expect(fw.Client.List(ctx, &tjs, client.InNamespace(ns))).To(Succeed())
		expectChildrenOwnedOnce(ns, tjs.Items)
		Expect(op.kills).To(BeNumerically(">=", 2*killsPerPhase))
		GinkgoWriter.Printf("SIGKILLs: %d; operator log: %s\n", op.kills, filepath.Join(op.dir, "operator.log"))
	})

	It("fails over: a new leader takes up the jobs created while none led, which the webhooks admitted meanwhile", func(sctx SpecContext) {
		const failover = 100
		ns := fw.NewNamespace(sctx, "failover").Name
		leases := fw.NewNamespace(sctx, "torus-system").Name
		op := &operatorProcess{dir: GinkgoT().TempDir(), leaseNamespace: leases}
		DeferCleanup(op.stop)
		op.start()
		ensureRuntimes()
		holder := func() string {
			var lease coordinationv1.Lease
			if err := fw.Client.Get(ctx, client.ObjectKey{Namespace: leases, Name: "torus-operator.torus-mpi.io"}, &lease); err != nil {
				return ""
			}
			return ptr.Deref(lease.Spec.HolderIdentity, "")
		}
		Eventually(holder, time.Minute, 100*time.Millisecond).ShouldNot(BeEmpty())
		first := holder()
		stopObserving := observeJobSets(ns)
		DeferCleanup(stopObserving)

		By("the leader killed with SIGKILL mid-batch; its successor serves the webhooks at once and leads once the lease lapses")
		var refused atomic.Int64
		created := run(func() {
			for i := range failover {
				createRetrying(ns, fmt.Sprintf("job-%03d", i), &refused)
				time.Sleep(30 * time.Millisecond)
			}
		})
		time.Sleep(time.Second)
		op.kill()
		op.start()
		Eventually(created, 2*time.Minute).Should(BeClosed(), "the successor's webhooks admit while the old lease holds")
		Eventually(holder, 2*time.Minute, 100*time.Millisecond).ShouldNot(Or(BeEmpty(), Equal(first)))
		Eventually(func(g Gomega) {
			var secrets corev1.SecretList
			g.Expect(fw.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{api.LabelJobName})).To(Succeed())
			g.Expect(secrets.Items).To(HaveLen(failover))
			allCreated(ns)(g)
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		var tjs trainer.TrainJobList
		Expect(fw.Client.List(ctx, &tjs, client.InNamespace(ns))).To(Succeed())
		Expect(tjs.Items).To(HaveLen(failover))
		expectChildrenOwnedOnce(ns, tjs.Items)
	})
})

// ensureRuntimes creates the shipped runtimes once, through the webhooks of
// the operator a spec started (specs run in random order).
var ensureRuntimes = sync.OnceFunc(func() { framework.CreateSampleRuntimes(ctx, fw.Client) })

// allCreated checks that every job in ns reports Created=True.
func allCreated(ns string) func(Gomega) {
	return func(g Gomega) {
		var tjs trainer.TrainJobList
		g.Expect(fw.Client.List(ctx, &tjs, client.InNamespace(ns))).To(Succeed())
		for _, tj := range tjs.Items {
			g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainjob.ConditionCreated)).To(BeTrue(), tj.Name)
		}
	}
}

// allFinished checks that all n jobs in ns were created, are Complete (their
// Running condition says so) and none Failed, and that their keys are deleted.
func allFinished(ns string, n int) func(Gomega) {
	return func(g Gomega) {
		var tjs trainer.TrainJobList
		g.Expect(fw.Client.List(ctx, &tjs, client.InNamespace(ns))).To(Succeed())
		g.Expect(tjs.Items).To(HaveLen(n))
		for _, tj := range tjs.Items {
			g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)).To(BeTrue(), tj.Name)
			g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)).To(BeFalse(), tj.Name)
			g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainjob.ConditionCreated)).To(BeTrue(), tj.Name)
			g.Expect(meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionRunning)).To(HaveField("Reason", trainjob.ReasonCompleted), tj.Name)
		}
		var secrets corev1.SecretList
		g.Expect(fw.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{api.LabelJobName})).To(Succeed())
		g.Expect(secrets.Items).To(BeEmpty(), "finished jobs' keys are deleted")
	}
}

// expectChildrenOwnedOnce checks that each job has exactly one JobSet (and
// NetworkPolicy, if any), each controlled by
// the job of that UID, and that nothing is owned by a job that is not.
func expectChildrenOwnedOnce(ns string, tjs []trainer.TrainJob) {
	GinkgoHelper()
	uids := map[string]types.UID{}
	for _, tj := range tjs {
		uids[tj.Name] = tj.UID
	}
	ownedOnce := func(kind string, objs []client.Object) {
		GinkgoHelper()
		owners := map[string]int{}
		for _, o := range objs {
			ref := metav1.GetControllerOf(o)
			Expect(ref).NotTo(BeNil(), "%s %s has no owner", kind, o.GetName())
			Expect(ref.Kind).To(Equal(trainer.TrainJobKind), "%s %s", kind, o.GetName())
			Expect(ref.UID).To(Equal(uids[ref.Name]), "%s %s is owned by no job of that name", kind, o.GetName())
			owners[ref.Name]++
		}
		for name := range uids {
			Expect(owners[name]).To(Equal(1), "job %s has %d %ss", name, owners[name], kind)
		}
	}
	var jobSets jobsetv1alpha2.JobSetList
	Expect(fw.Client.List(ctx, &jobSets, client.InNamespace(ns))).To(Succeed())
	ownedOnce("JobSet", items(jobSets.Items))
	// The hostfile travels in the job's Secret: Torus makes no ConfigMap.
	var configMaps corev1.ConfigMapList
	Expect(fw.Client.List(ctx, &configMaps, client.InNamespace(ns), client.HasLabels{api.LabelJobName})).To(Succeed())
	Expect(configMaps.Items).To(BeEmpty())
	var policies networkingv1.NetworkPolicyList
	Expect(fw.Client.List(ctx, &policies, client.InNamespace(ns))).To(Succeed())
	if len(policies.Items) > 0 {
		ownedOnce("NetworkPolicy", items(policies.Items))
	}
}

// run runs f in the background; the channel closes when it returns.
func run(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		f()
	}()
	return done
}

// killWhile kills and restarts the operator at random moments until work
// is done and it was killed killsPerPhase times.
func killWhile(op *operatorProcess, rng *rand.Rand, work <-chan struct{}) {
	GinkgoHelper()
	for n := 0; ; n++ {
		select {
		case <-work:
			if n >= killsPerPhase {
				return
			}
		default:
		}
		time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
		op.kill()
		op.start()
	}
}

// createRetrying creates a TrainJob as a client would while the webhook is
// down (failurePolicy Fail): retry until admitted. A create whose answer was
// lost but which was stored reads as AlreadyExists.
func createRetrying(ns, name string, refused *atomic.Int64) {
	GinkgoHelper()
	Eventually(func() error {
		tj := wrappers.MakeTrainJob(name, ns).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		err := fw.Client.Create(ctx, tj)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			refused.Add(1)
			return err
		}
		return nil
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
}

// createAll creates TrainJobs job-000 to job-<n-1> in ns from 8 clients at
// once, each pausing between its creates, retrying as createRetrying does.
func createAll(ns string, n int, pause time.Duration, refused *atomic.Int64) {
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			defer GinkgoRecover()
			for i := w; i < n; i += 8 {
				createRetrying(ns, fmt.Sprintf("job-%03d", i), refused)
				time.Sleep(pause)
			}
		})
	}
	wg.Wait()
}

// observeJobSets writes the first status of each new JobSet in ns, as the
// JobSet controller does, until stopped.
func observeJobSets(ns string) func() {
	stop := make(chan struct{})
	done := run(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var list jobsetv1alpha2.JobSetList
			if err := fw.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range list.Items {
				js := &list.Items[i]
				if len(js.Status.ReplicatedJobsStatus) > 0 {
					continue
				}
				for _, rj := range js.Spec.ReplicatedJobs {
					js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: rj.Name})
				}
				// A conflict: seen again on the next pass.
				_ = fw.Client.Status().Update(ctx, js)
			}
		}
	})
	return func() {
		close(stop)
		<-done
	}
}

// complete marks a JobSet Completed, as the JobSet controller does when its
// launcher succeeds, retrying while the API server is away or the JobSet
// changed.
func complete(key client.ObjectKey) {
	GinkgoHelper()
	Eventually(func() error {
		var js jobsetv1alpha2.JobSet
		if err := fw.Client.Get(ctx, key, &js); err != nil {
			return err
		}
		meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{
			Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully",
		})
		return fw.Client.Status().Update(ctx, &js)
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
}

func items[T any, P interface {
	*T
	client.Object
}](list []T) []client.Object {
	out := make([]client.Object, len(list))
	for i := range list {
		out[i] = P(&list[i])
	}
	return out
}
