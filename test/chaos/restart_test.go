package chaos_test

import (
	"fmt"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("The API server and etcd restarted mid-batch", func() {
	It("loses no job and duplicates no child of 200, and the operator rides the restarts out with a bounded number of requests", func(sctx SpecContext) {
		const n = 200
		ns := fw.NewNamespace(sctx, "restarts").Name
		// A proxy that only counts: the operator's requests per job.
		proxy, op := behindProxy(ns, 0, 0)

		// restarts takes the API server down, then etcd, while work runs.
		restarts := func(work <-chan struct{}) {
			GinkgoHelper()
			time.Sleep(time.Second)
			fw.Restart(framework.APIServer, 2*time.Second)
			time.Sleep(2 * time.Second)
			fw.Restart(framework.Etcd, 2*time.Second)
			Eventually(work, 3*time.Minute).Should(BeClosed())
		}

		By(fmt.Sprintf("creating %d TrainJobs while the API server and then etcd restart", n))
		var refused atomic.Int64
		restarts(run(func() { createAll(ns, n, 40*time.Millisecond, &refused) }))
		Eventually(allCreated(ns), 3*time.Minute, 200*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("creations that failed and were retried: %d\n", refused.Load())

		By("finishing them while the API server and etcd restart again")
		var list jobsetv1alpha2.JobSetList
		Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(n))
		restarts(run(func() {
			for i := range list.Items {
				complete(client.ObjectKeyFromObject(&list.Items[i]))
				time.Sleep(20 * time.Millisecond)
			}
		}))
		Eventually(allFinished(ns, n), 3*time.Minute, 200*time.Millisecond).Should(Succeed())

		By("every job with exactly its children; the operator never exited")
		var tjs trainer.TrainJobList
		Expect(fw.Client.List(ctx, &tjs, client.InNamespace(ns))).To(Succeed())
		expectChildrenOwnedOnce(ns, tjs.Items)
		Expect(op.running()).To(BeTrue(), "the operator exited; see %s", op.dir)
		perJob, verbs := proxy.expectSettled(n)
		GinkgoWriter.Printf("requests per job across 4 restarts: %.1f (%s)\n", perJob, verbs)
	})
})
