package plugin_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	"github.com/torus-mpi/torus/plugin/dashboard"
)

// The dashboard's Go handlers as the page calls them, behind their guard,
// against the API server with Torus's webhooks and controllers: status codes,
// the API server's own refusals, and the server-sent events that move the
// page.
var _ = Describe("The dashboard's API", Ordered, func() {
	const token = "0123456789abcdef0123456789abcdef"
	var (
		base, ns string
		web      = &http.Client{Timeout: 30 * time.Second}
	)
	BeforeAll(func(sctx SpecContext) {
		ns = fw.NewNamespace(sctx, "dashboard").Name
		flags := genericclioptions.NewConfigFlags(true)
		flags.KubeConfig, flags.Namespace = &fw.Kubeconfig, &ns
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		h, err := dashboard.Handler(plugclient.New(flags), token, l.Addr())
		Expect(err).NotTo(HaveOccurred())
		srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
		srv.Start()
		DeferCleanup(srv.Close)
		base = srv.URL
	})

	// call makes a request as the page does: the token, and for a write
	// the page's origin and JSON.
	call := func(method, path, body string) (int, string) {
		GinkgoHelper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+token)
		if method != http.MethodGet {
			req.Header.Set("Origin", base)
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := web.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(data)
	}

	// stream opens a server-sent event stream of the dashboard's; each
	// frame it reads comes on the channel, which closes with the stream.
	stream := func(sctx SpecContext, path string) <-chan string {
		GinkgoHelper()
		req, err := http.NewRequestWithContext(sctx, http.MethodGet, base+path, nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{}).Do(req)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(resp.Body.Close)
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
		frames := make(chan string, 16)
		go func() {
			defer GinkgoRecover()
			defer close(frames)
			r := bufio.NewReader(resp.Body)
			var frame strings.Builder
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\n" {
					frames <- frame.String()
					frame.Reset()
					continue
				}
				frame.WriteString(line)
			}
		}()
		return frames
	}

	It("answers nothing without the token, nor under another host name", func() {
		resp, err := web.Get(base + "/api/jobs")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

		req, err := http.NewRequest(http.MethodGet, base+"/api/jobs", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Host = "evil.example"
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err = web.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusMisdirectedRequest))
	})

	It("refuses a form the job cannot be made of, each problem under its field, and creates nothing", func() {
		code, body := call(http.MethodPost, "/api/namespaces/"+ns+"/jobs", `{"name":"bad","image":"mpi:1","command":"true","workers":"0","stall-timeout":"5s"}`)
		Expect(code).To(Equal(http.StatusUnprocessableEntity), body)
		var out struct {
			Errors []struct{ Field, Message string }
		}
		Expect(json.Unmarshal([]byte(body), &out)).To(Succeed())
		Expect(out.Errors).To(ContainElements(
			HaveField("Field", "workers"),
			And(HaveField("Field", "stall-timeout"), HaveField("Message", ContainSubstring("from 1m0s to 168h0m0s")))))
		err := fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bad"}, &trainer.TrainJob{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	It("creates a job from the form, lists it, reads it, and streams its changes as server-sent events", func(sctx SpecContext) {
		code, body := call(http.MethodPost, "/api/namespaces/"+ns+"/jobs", `{"name":"pi","image":"mpi:1","command":"mpirun -n 2 true","workers":"2","stall-timeout":"30m"}`)
		Expect(code).To(Equal(http.StatusCreated), body)
		var tj trainer.TrainJob
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi"}, &tj)).To(Succeed())
		Expect(tj.Annotations).To(HaveKeyWithValue("torus-mpi.io/stall-timeout", "30m"))

		code, body = call(http.MethodGet, "/api/jobs?namespace="+ns, "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`"name":"pi"`))
		code, body = call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/pi", "")
		Expect(code).To(Equal(http.StatusOK), body)
		code, body = call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/nope", "")
		Expect(code).To(Equal(http.StatusNotFound), body)
		Expect(body).To(ContainSubstring(`"error"`))
		code, body = call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/pi/yaml", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring("kind: TrainJob"))
		code, body = call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/pi/form", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(And(ContainSubstring(`"workers":"2"`), ContainSubstring(`"stall-timeout":"30m"`)))
		code, body = call(http.MethodGet, "/api/runtimes", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring("torus-openmpi"))

		By("the list's stream: a first change, then the job's new row when it changes")
		frames := stream(sctx, "/api/watch?rows=true&namespace="+ns)
		Eventually(frames, 30*time.Second).Should(Receive(Equal("event: changed\ndata: {}\n")))
		Expect(fw.Client.Patch(ctx, &tj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"vision"}}}`)))).To(Succeed())
		// Each frame is an event and one line of JSON; the job's frame
		// carries its row.
		var row string
		Eventually(frames, 30*time.Second).Should(Receive(&row, HavePrefix("event: job\ndata: {")))
		data := strings.TrimSuffix(strings.TrimPrefix(row, "event: job\ndata: "), "\n")
		Expect(data).NotTo(ContainSubstring("\n"))
		var parsed map[string]any
		Expect(json.Unmarshal([]byte(data), &parsed)).To(Succeed())
		Expect(parsed).To(HaveKeyWithValue("name", "pi"))

		By("the job's stream: a first change once it holds the job's pods, then one when a pod of the job changes")
		jobFrames := stream(sctx, "/api/watch?namespace="+ns+"&job=pi")
		Eventually(jobFrames, 30*time.Second).Should(Receive(Equal("event: changed\ndata: {}\n")))
		Expect(fw.Client.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-0", Namespace: ns, Labels: map[string]string{api.LabelJobName: "pi"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "mpi:1"}}},
		})).To(Succeed())
		Eventually(jobFrames, 30*time.Second).Should(Receive(Equal("event: changed\ndata: {}\n")))
	})

	It("serves a job's metrics history from the ConfigMap the job controls, and from no other", func() {
		var tj trainer.TrainJob
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi"}, &tj)).To(Succeed())
		code, body := call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/pi/history", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(MatchJSON(`{"series":[]}`))

		history := `{"series":[{"name":"loss","points":[{"t":100,"v":0.5},{"t":110,"v":0.25}]}]}`
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: trainerstatus.HistoryName("pi")},
			Data:       map[string]string{trainerstatus.HistoryKey: history},
		}
		Expect(fw.Client.Create(ctx, cm)).To(Succeed())
		code, body = call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/pi/history", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(MatchJSON(`{"series":[]}`), "a ConfigMap the job does not control")

		Expect(controllerutil.SetControllerReference(&tj, cm, fw.Client.Scheme())).To(Succeed())
		Expect(fw.Client.Update(ctx, cm)).To(Succeed())
		code, body = call(http.MethodGet, "/api/namespaces/"+ns+"/jobs/pi/history", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(MatchJSON(history))
	})

	It("deletes a job, its JobSet and pods first, and says so; a job that does not exist is not found", func() {
		code, body := call(http.MethodDelete, "/api/namespaces/"+ns+"/jobs/pi", "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`"deleted":"pi"`))
		// Foreground deletion: the garbage collector, which this API server
		// runs without, removes the job once its dependents are gone.
		var tj trainer.TrainJob
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi"}, &tj)).To(Succeed())
		Expect(tj.DeletionTimestamp).NotTo(BeNil())
		Expect(tj.Finalizers).To(ContainElement("foregroundDeletion"))
		code, body = call(http.MethodDelete, "/api/namespaces/"+ns+"/jobs/nope", "")
		Expect(code).To(Equal(http.StatusNotFound), body)
	})
})
