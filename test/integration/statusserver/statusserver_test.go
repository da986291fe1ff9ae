package statusserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/operator/statusserver"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// job is a TrainJob with the chain of owners its pods have: a JobSet it
// controls, a Job the JobSet controls and a pod the Job controls.
type job struct {
	tj  *trainer.TrainJob
	pod *corev1.Pod
}

const serviceAccount = "trainer"

func newNamespace(prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: ns.Name}})).To(Succeed())
	return ns.Name
}

func controlledBy(owner client.Object, kind, apiVersion string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
}

func makeJob(ns, name string) job {
	GinkgoHelper()
	tj := wrappers.MakeTrainJob(name, ns).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
	Expect(k8s.Create(ctx, tj)).To(Succeed())
	podSpec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: serviceAccount,
		Containers: []corev1.Container{{Name: "node", Image: "registry.torus.local/mpi:1"}}}
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: controlledBy(tj, trainer.TrainJobKind, trainer.GroupVersion.String())},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec}}}}}},
	}
	Expect(k8s.Create(ctx, js)).To(Succeed())
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-node-0", Namespace: ns, OwnerReferences: controlledBy(js, "JobSet", jobsetv1alpha2.GroupVersion.String())},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec}},
	}
	Expect(k8s.Create(ctx, j)).To(Succeed())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-node-0-0", Namespace: ns, OwnerReferences: controlledBy(j, "Job", "batch/v1")},
		Spec:       podSpec,
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	return job{tj: tj, pod: pod}
}

// token is what the kubelet projects into pod for audience: a token of
// the pod's ServiceAccount, bound to the pod.
func token(pod *corev1.Pod, audience string) string {
	GinkgoHelper()
	tr, err := clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// ownToken is the token the job's own pod reports with.
func (j job) ownToken() string {
	return token(j.pod, trainerstatus.Audience(j.tj.Namespace, j.tj.Name))
}

func report(progress int32, metrics ...string) []byte {
	st := map[string]any{"progressPercentage": progress, "estimatedRemainingSeconds": 120,
		// The program's own clock, which the server replaces with its own.
		"lastUpdatedTime": "2020-01-01T00:00:00Z"}
	var ms []map[string]string
	for i := 0; i+1 < len(metrics); i += 2 {
		ms = append(ms, map[string]string{"name": metrics[i], "value": metrics[i+1]})
	}
	if ms != nil {
		st["metrics"] = ms
	}
	body, err := json.Marshal(map[string]any{"trainerStatus": st})
	Expect(err).NotTo(HaveOccurred())
	return body
}

var _ = Describe("the TrainJob status endpoint", Ordered, func() {
	var (
		server   *httptest.Server
		ns       string
		own, two job
		interval = 2 * time.Second
	)
	post := func(j job, token string, body []byte) (int, string) {
		GinkgoHelper()
		req, err := http.NewRequest(http.MethodPost, server.URL+trainerstatus.Path(j.tj.Namespace, j.tj.Name), bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := server.Client().Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(out)
	}
	trainerStatus := func(j job) *trainer.TrainerStatus {
		var tj trainer.TrainJob
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(j.tj), &tj)).To(Succeed())
		return tj.Status.TrainerStatus
	}

	BeforeAll(func() {
		opts := statusserver.DefaultOptions()
		opts.WriteInterval = interval
		mux := http.NewServeMux()
		mux.Handle(trainerstatus.Pattern, statusserver.New(k8s, k8s, k8s, opts, ctrl.Log.WithName("status-server")))
		server = httptest.NewTLSServer(mux)
		DeferCleanup(server.Close)
		ns = newNamespace("progress")
		own, two = makeJob(ns, "own"), makeJob(ns, "two")
	})

	It("writes a report from the job's own pod to its status, at the time it took it", func() {
		before := time.Now().Add(-time.Second)
		code, body := post(own, own.ownToken(), report(42, "loss", "0.25", "accuracy", "0.9"))
		Expect(code).To(Equal(http.StatusOK), body)
		st := trainerStatus(own)
		Expect(st).NotTo(BeNil())
		Expect(st.ProgressPercentage).To(Equal(ptr.To[int32](42)))
		Expect(st.EstimatedRemainingSeconds).To(Equal(ptr.To[int32](120)))
		Expect(st.Metrics).To(Equal([]trainer.Metric{{Name: "loss", Value: "0.25"}, {Name: "accuracy", Value: "0.9"}}))
		Expect(st.LastUpdatedTime.Time).To(BeTemporally(">=", before.Truncate(time.Second)))
	})

	It("keeps each numeric metric's values over the run in a ConfigMap the job controls, and leaves a user's ConfigMap of that name alone", func() {
		history := func(j job) (trainerstatus.History, *corev1.ConfigMap) {
			GinkgoHelper()
			var cm corev1.ConfigMap
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: j.tj.Namespace, Name: trainerstatus.HistoryName(j.tj.Name)}, &cm)).To(Succeed())
			h, err := trainerstatus.ParseHistory(cm.Data[trainerstatus.HistoryKey])
			Expect(err).NotTo(HaveOccurred())
			return h, &cm
		}
		By("the first report's metrics are the history's first points")
		h, cm := history(own)
		Expect(metav1.IsControlledBy(cm, own.tj)).To(BeTrue(), "owners: %v", cm.OwnerReferences)
		Expect(h.Series).To(HaveLen(2))
		Expect(h.Series[0].Name).To(Equal("loss"))
		Expect(h.Series[0].Points).To(HaveLen(1))
		Expect(h.Series[0].Points[0].Value).To(Equal(0.25))

		By("a later report, written at its turn, adds a point; a value that is not a number adds none")
		// A report's time is the second the server took it: a report in
		// the same second replaces the point.
		time.Sleep(time.Until(time.Unix(h.Series[0].Points[0].Time+1, 0)))
		code, body := post(own, own.ownToken(), report(50, "loss", "0.125", "accuracy", "n/a"))
		Expect(code).To(Equal(http.StatusOK), body)
		Eventually(func() []trainerstatus.Point { h, _ := history(own); return h.Series[0].Points }, 30*time.Second, 200*time.Millisecond).Should(HaveLen(2))
		h, _ = history(own)
		Expect(h.Series[0].Points[1].Value).To(Equal(0.125))
		Expect(h.Series[0].Points[1].Time).To(BeNumerically(">", h.Series[0].Points[0].Time))
		Expect(h.Series[1].Points).To(HaveLen(1), "accuracy")

		By("a ConfigMap of the history's name that the job does not control is the user's")
		mine := makeJob(ns, "mine")
		users := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: trainerstatus.HistoryName("mine")},
			Data:       map[string]string{trainerstatus.HistoryKey: "the user's own"},
		}
		Expect(k8s.Create(ctx, users)).To(Succeed())
		code, body = post(mine, mine.ownToken(), report(10, "loss", "1"))
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(trainerStatus(mine).ProgressPercentage).To(Equal(ptr.To[int32](10)))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(users), users)).To(Succeed())
		Expect(users.Data).To(Equal(map[string]string{trainerstatus.HistoryKey: "the user's own"}))
		Expect(users.OwnerReferences).To(BeEmpty())
	})

	DescribeTable("refuses a report that is not the job's own, writing nothing",
		func(tokenOf func() string, wantCode int, wantMessage string) {
			before := trainerStatus(two)
			code, body := post(two, tokenOf(), report(99))
			Expect(code).To(Equal(wantCode), body)
			var st metav1.Status
			Expect(json.Unmarshal([]byte(body), &st)).To(Succeed(), body)
			Expect(st.Message).To(ContainSubstring(wantMessage))
			Expect(trainerStatus(two)).To(Equal(before))
		},
		Entry("no token", func() string { return "" }, http.StatusUnauthorized, "no bearer token"),
		Entry("a token the API server did not issue", func() string { return "not-a-token" }, http.StatusForbidden, "not valid for TrainJob"),
		Entry("another job's pod, with its own job's token", func() string { return own.ownToken() }, http.StatusForbidden, "not valid for TrainJob"),
		Entry("another job's pod, with a token it asked for this job's audience", func() string {
			return token(own.pod, trainerstatus.Audience(two.tj.Namespace, two.tj.Name))
		}, http.StatusForbidden, "is not a pod of TrainJob"),
		Entry("a pod of another namespace, with a token for this job's audience", func() string {
			other := makeJob(newNamespace("other"), "two")
			return token(other.pod, trainerstatus.Audience(two.tj.Namespace, two.tj.Name))
		}, http.StatusForbidden, "not the job's"),
		Entry("a ServiceAccount token bound to no pod, for this job's audience", func() string {
			tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{Audiences: []string{trainerstatus.Audience(two.tj.Namespace, two.tj.Name)}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tr.Status.Token
		}, http.StatusForbidden, "not bound to a pod"),
	)

	It("answers a flood of tokens it has not seen from one address with 429s, and still reviews another pod's token", func() {
		// Another address of the loopback network: the flooding pod.
		flooder := server.Client()
		transport := flooder.Transport.(*http.Transport).Clone()
		transport.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext
		flooder = &http.Client{Transport: transport}
		reviewed := 0
		started := time.Now()
		for i := range 40 {
			req, err := http.NewRequest(http.MethodPost, server.URL+trainerstatus.Path(two.tj.Namespace, two.tj.Name), bytes.NewReader(report(1)))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", fmt.Sprintf("Bearer not-a-token-%d", i))
			resp, err := flooder.Do(req)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			Expect(resp.StatusCode).To(BeElementOf(http.StatusForbidden, http.StatusTooManyRequests))
			if resp.StatusCode == http.StatusForbidden {
				reviewed++
			}
		}
		// An address's share: a burst of 10, then 2 reviews a second.
		share := 10 + int(2*time.Since(started).Seconds()) + 1
		Expect(reviewed).To(BeNumerically("<=", share), "%d unknown tokens from one address were reviewed in %s", reviewed, time.Since(started))
		code, body := post(own, own.ownToken(), report(43))
		Expect(code).To(Equal(http.StatusOK), body)
	})

	It("refuses a report the TrainJob API would not take, and one too large, saying why", func() {
		code, body := post(two, two.ownToken(), []byte(`{"trainerStatus":{"progressPercentage":101}}`))
		Expect(code).To(Equal(http.StatusUnprocessableEntity), body)
		Expect(body).To(ContainSubstring("progressPercentage must be between 0 and 100, got 101"))
		code, body = post(two, two.ownToken(), []byte(`{"trainerStatus":{"metrics":[{"name":"loss","value":""}]}}`))
		Expect(code).To(Equal(http.StatusUnprocessableEntity), body)
		Expect(body).To(ContainSubstring("send numbers as strings"))
		code, body = post(two, two.ownToken(), append([]byte(`{"trainerStatus":{"metrics":[{"name":"`), bytes.Repeat([]byte("x"), trainerstatus.MaxBody)...))
		Expect(code).To(Equal(http.StatusRequestEntityTooLarge), body)
	})

	It("writes a job's status at most once per write interval however fast its pods report, the latest report last, and the report of the end at once", func() {
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": "two"})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		hw, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": trainerstatus.HistoryName("two")})
		Expect(err).NotTo(HaveOccurred())
		defer hw.Stop()
		var (
			mu            sync.Mutex
			writes        []time.Time
			historyWrites []time.Time
		)
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Modified {
					mu.Lock()
					writes = append(writes, time.Now())
					mu.Unlock()
				}
			}
		}()
		go func() {
			for ev := range hw.ResultChan() {
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					mu.Lock()
					historyWrites = append(historyWrites, time.Now())
					mu.Unlock()
				}
			}
		}()

		By("a flood of reports from every pod of the job at once, for three write intervals")
		tok := two.ownToken()
		var (
			codes   sync.Map
			flood   sync.WaitGroup
			last    int32
			lastMu  sync.Mutex
			started = time.Now()
			stopped = started.Add(3 * interval)
		)
		for worker := range 8 {
			flood.Go(func() {
				defer GinkgoRecover()
				for i := int32(0); time.Now().Before(stopped); i++ {
					p := min(99, i)
					code, _ := post(two, tok, report(p, "worker", fmt.Sprint(worker)))
					n, _ := codes.LoadOrStore(code, new(int))
					lastMu.Lock()
					*n.(*int)++
					if code == http.StatusOK && p > last {
						last = p
					}
					lastMu.Unlock()
				}
			})
		}
		flood.Wait()
		ok, _ := codes.Load(http.StatusOK)
		limited, _ := codes.Load(http.StatusTooManyRequests)
		Expect(ok).NotTo(BeNil(), "no report was taken")
		Expect(limited).NotTo(BeNil(), "the flood was never limited")
		codes.Range(func(code, _ any) bool {
			Expect(code).To(BeElementOf(http.StatusOK, http.StatusTooManyRequests), "a report of the flood got %d", code)
			return true
		})

		By("the report taken last reaches the status, one interval after the write before it")
		// The held report's write is due an interval after the write before
		// it; a busy machine may run its timer late.
		Eventually(func() *int32 { return trainerStatus(two).ProgressPercentage }, 30*time.Second, 100*time.Millisecond).Should(Equal(ptr.To(last)))
		mu.Lock()
		defer mu.Unlock()
		// One write at once, then at most one per interval while the flood
		// lasts, and the last report's after it.
		bound := int(time.Since(started)/interval) + 2
		Expect(writes).NotTo(BeEmpty())
		Expect(len(writes)).To(BeNumerically("<=", bound), "%d writes of the job's status in %s, more than one per %s: %v", len(writes), time.Since(started), interval, writes)
		Expect(historyWrites).NotTo(BeEmpty(), "the flood's metric has no history")
		Expect(len(historyWrites)).To(BeNumerically("<=", bound), "%d writes of the job's metrics history in %s, more than one per %s: %v", len(historyWrites), time.Since(started), interval, historyWrites)

		By("the report of the end, 100 %, is in the status when the pod has its answer")
		// Once the flood's share of the job's rate has come back.
		Eventually(func() int {
			code, _ := post(two, tok, report(100, "loss", "0.01"))
			return code
		}, 5*time.Second, 600*time.Millisecond).Should(Equal(http.StatusOK))
		Expect(trainerStatus(two).ProgressPercentage).To(Equal(ptr.To[int32](100)))
	})
})
