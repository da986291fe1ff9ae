// Package dashboard is kubectl mpi dashboard: a web page of the user's jobs
// served on loopback by the plugin itself, like kubectl proxy serves the
// API. It acts with the user's own kubeconfig identity, so what it shows
// and does is what the user's RBAC allows; nothing runs in the cluster for
// it. Every page reads the same code as the commands (job summaries as
// list, a job as describe, logs as logs, the create form as run).
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/plugin/describe"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/logs"
	"github.com/torus-mpi/torus/plugin/run"
	"github.com/torus-mpi/torus/plugin/top"
)

// server answers the page's requests with the user's clients.
type server struct {
	client    client.WithWatch
	kube      kubernetes.Interface
	usage     *top.Reader
	pods      *jobPods
	namespace string
	clock     clock.PassiveClock
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/context", s.context)
	mux.HandleFunc("GET /api/jobs", s.jobs)
	mux.HandleFunc("GET /api/watch", s.watch)
	mux.HandleFunc("GET /api/runtimes", s.runtimes)
	mux.HandleFunc("GET /api/namespaces/{ns}/queues", s.queues)
	mux.HandleFunc("GET /api/namespaces/{ns}/jobs/{name}", s.job)
	mux.HandleFunc("GET /api/namespaces/{ns}/jobs/{name}/yaml", s.yaml)
	mux.HandleFunc("GET /api/namespaces/{ns}/jobs/{name}/logs", s.logs)
	mux.HandleFunc("GET /api/namespaces/{ns}/jobs/{name}/form", s.form)
	mux.HandleFunc("GET /api/namespaces/{ns}/jobs/{name}/usage", s.jobUsage)
	mux.HandleFunc("GET /api/namespaces/{ns}/jobs/{name}/history", s.history)
	mux.HandleFunc("POST /api/namespaces/{ns}/jobs", s.create)
	mux.HandleFunc("DELETE /api/namespaces/{ns}/jobs/{name}", s.delete)
	mux.Handle("GET /", s.page())
	return mux
}

// page serves the built assets; every path that is not a file is the
// single page's, which routes in the browser.
func (s *server) page() http.Handler {
	files := assets()
	if _, err := fs.Stat(files, "index.html"); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this kubectl-mpi was built without the dashboard's page: build it with make build (which runs make web)", http.StatusNotImplemented)
		})
	}
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		if name == "" || strings.HasSuffix(name, "/") {
			name = "index.html"
		}
		if _, err := fs.Stat(files, name); err != nil || name == "index.html" {
			w.Header().Set("Cache-Control", "no-store")
			http.ServeFileFS(w, r, files, "index.html")
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=3600")
		fileServer.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers with the API server's own status code and words.
func apiError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var status apierrors.APIStatus
	var notFound *job.NotFoundError
	switch {
	case errors.As(err, &notFound):
		code = http.StatusNotFound
	case errors.As(err, &status):
		code = int(status.Status().Code)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// namespaceOf is the namespace asked for: ?all=true for every namespace
// the user may list (""), else ?namespace=, else the kubeconfig's.
func (s *server) namespaceOf(r *http.Request) string {
	q := r.URL.Query()
	if q.Get("all") == "true" {
		return ""
	}
	if ns := q.Get("namespace"); ns != "" {
		return ns
	}
	return s.namespace
}

func (s *server) context(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"namespace": s.namespace})
}

// Row is a job in the list: list's summary, and what kind of job it is.
type Row struct {
	job.Summary
	// Type is the MPI implementation, or the ML policy of a job that is
	// not MPI (PyTorch, ...), or "" when the runtime is unknown.
	Type string `json:"type"`
	MPI  bool   `json:"mpi"`
}

func (s *server) jobs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var list trainer.TrainJobList
	if err := s.client.List(ctx, &list, client.InNamespace(s.namespaceOf(r))); err != nil {
		apiError(w, fmt.Errorf("listing TrainJobs: %w", err))
		return
	}
	runtimes := job.NewRuntimes(s.client)
	now := s.clock.Now()
	rows := make([]Row, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, rowOf(ctx, runtimes, &list.Items[i], now))
	}
	writeJSON(w, http.StatusOK, rows)
}

// rowOf is one job's row of the list.
func rowOf(ctx context.Context, runtimes *job.Runtimes, tj *trainer.TrainJob, now time.Time) Row {
	info := job.Resolve(ctx, runtimes, tj)
	row := Row{Summary: job.Summarize(info, now)}
	switch {
	case info.Job != nil:
		row.Type, row.MPI = info.Implementation().DisplayName(), true
	case info.Runtime != nil:
		row.Type = policyOf(info.Runtime.Spec.MLPolicy)
	}
	return row
}

// policyOf names a runtime's ML policy as the guide does.
func policyOf(p *trainer.MLPolicy) string {
	switch {
	case p == nil:
		return "Plain"
	case p.MPI != nil:
		return "MPI"
	case p.Torch != nil:
		return "PyTorch"
	}
	return "Other"
}

func (s *server) job(w http.ResponseWriter, r *http.Request) {
	tj, err := job.Get(r.Context(), s.client, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		apiError(w, err)
		return
	}
	c, tables := s.pods.viewReader(s.client, tj.Namespace, tj.Name)
	writeJSON(w, http.StatusOK, describe.Describe(r.Context(), c, tables, tj, s.clock.Now()))
}

func (s *server) yaml(w http.ResponseWriter, r *http.Request) {
	var tj trainer.TrainJob
	if err := s.client.Get(r.Context(), client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}, &tj); err != nil {
		apiError(w, err)
		return
	}
	tj.ManagedFields = nil
	tj.APIVersion, tj.Kind = trainer.GroupVersion.String(), trainer.TrainJobKind
	out, err := yaml.Marshal(&tj)
	if err != nil {
		apiError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(out)
}

// history is the job's metrics over its run, as the status server keeps
// them: no series when its program reported no number, or when the
// ConfigMap of that name is not the job's own.
func (s *server) history(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tj, err := job.Get(ctx, s.client, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		apiError(w, err)
		return
	}
	h := trainerstatus.History{Series: []trainerstatus.Series{}}
	var cm corev1.ConfigMap
	err = s.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: trainerstatus.HistoryName(tj.Name)}, &cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		apiError(w, fmt.Errorf("reading the metrics history of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err))
		return
	case metav1.IsControlledBy(&cm, tj):
		if read, err := trainerstatus.ParseHistory(cm.Data[trainerstatus.HistoryKey]); err == nil {
			h = read
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// logs streams a job's logs as logs does: ?host=launcher or worker-N for
// one host (none: every host, each line prefixed), ?follow=true to follow
// until the job ends, ?tail=N.
func (s *server) logs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tj, err := job.Get(ctx, s.client, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		apiError(w, err)
		return
	}
	q := r.URL.Query()
	// Every host's logs are a stream of their own: all of them, for a job
	// of thousands, would be thousands of requests to the API server and
	// the kubelets. The launcher and the first workers are followed; the
	// page names them and offers every host one at a time.
	hosts := firstHosts(maxLogHosts)
	if h := q.Get("host"); h != "" {
		host, ok := mpi.ParseHost(h)
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("host %q: name the launcher or worker-N", h)})
			return
		}
		hosts = []mpi.Host{host}
	} else {
		w.Header().Set(headerLogHosts, strconv.Itoa(maxLogHosts))
	}
	opts := logs.Options{Container: mpi.TrainerContainer, Follow: q.Get("follow") == "true"}
	if t, err := strconv.ParseInt(q.Get("tail"), 10, 64); err == nil && t >= 0 {
		opts.TailLines = ptr.To(t)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	fw := &flushWriter{w: w}
	opts.Out, opts.ErrOut = fw, fw
	if err := logs.StreamJob(ctx, s.client, s.kube, tj, hosts, opts); err != nil && ctx.Err() == nil {
		fmt.Fprintf(fw, "(%v)\n", err)
	}
}

// maxLogHosts is how many hosts' logs the page streams at once, as
// kubectl's --max-log-requests bounds the streams of one command.
const maxLogHosts = 8

// headerLogHosts tells the page that its logs are the first this many
// hosts' (the launcher first, then workers by index).
const headerLogHosts = "X-Torus-Log-Hosts"

// firstHosts are the launcher and the first n-1 workers.
func firstHosts(n int) []mpi.Host {
	hosts := []mpi.Host{{Role: api.RoleLauncher}}
	for i := range int32(n - 1) {
		hosts = append(hosts, mpi.Host{Role: api.RoleWorker, Index: i})
	}
	return hosts
}

// flushWriter sends each write to the browser at once.
type flushWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (f *flushWriter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(b)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

// watch tells the page, as server-sent events, that what it shows has
// changed: the namespace's TrainJobs, and with ?job= that job's pods and
// events. The page then reads again; a change burst is one message.
func (s *server) watch(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ns := s.namespaceOf(r)
	name := r.URL.Query().Get("job")
	type source struct {
		list client.ObjectList
		opts []client.ListOption
	}
	sources := []source{{&trainer.TrainJobList{}, []client.ListOption{client.InNamespace(ns)}}}
	if name != "" {
		// The job's own events and its JobSet's, which share its name.
		sources = append(sources, source{&corev1.EventList{}, []client.ListOption{client.InNamespace(ns), client.MatchingFields{"involvedObject.name": name}}})
	}
	// With ?rows=true (the list of jobs) each change of a TrainJob comes as
	// its new row, or as its name when it is gone: the page updates that
	// row rather than read every job again.
	rows := r.URL.Query().Get("rows") == "true"
	updates := make(chan watch.Event, 256)
	changed := make(chan struct{}, 1)
	// A watch the API server ends (its timeout, an expired resource
	// version) ends the stream: the page then connects again and reads
	// afresh, rather than wait on a watch that is gone.
	ended := make(chan struct{}, len(sources))
	var watchers []watch.Interface
	defer func() {
		for _, wi := range watchers {
			wi.Stop()
		}
	}()
	for _, src := range sources {
		wi, err := s.client.Watch(ctx, src.list, src.opts...)
		if err != nil {
			if src.list == sources[0].list {
				apiError(w, fmt.Errorf("watching TrainJobs: %w", err))
				return
			}
			continue // pods or events the user may not watch: the job's own changes still come
		}
		watchers = append(watchers, wi)
		asRows := rows && src.list == sources[0].list
		go func() {
			defer func() { ended <- struct{}{} }()
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					return
				}
				if asRows {
					select {
					case updates <- ev:
						continue
					default:
						// Too many at once: the page reads them all.
					}
				}
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	if name != "" && s.maySeePods(ctx, ns, name) {
		// The job's pods, from the feed the page's reads share.
		unsubscribe, synced := s.pods.subscribe(ns, name, changed)
		defer unsubscribe()
		// The page reads again once the feed holds the pods, and not
		// before: a read before would list them (a glance at their Table)
		// as the feed lists them too. What changes in the meantime is in
		// that one read.
		select {
		case <-synced.Done():
		case <-ctx.Done():
			return
		case <-ended:
			return
		}
		select {
		case <-changed:
		default:
		}
	}
	// Whatever changed between the page's read and this watch's start.
	fmt.Fprint(w, "event: changed\ndata: {}\n\n")
	flusher.Flush()
	keepAlive := time.NewTicker(20 * time.Second)
	defer keepAlive.Stop()
	lastChanged := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-keepAlive.C:
			fmt.Fprint(w, ": alive\n\n")
		case ev := <-updates:
			runtimes := job.NewRuntimes(s.client)
			for more := true; more; {
				s.sendRow(ctx, w, runtimes, ev)
				select {
				case ev = <-updates:
				default:
					more = false
				}
			}
		case <-changed:
			// A burst of events (a job's pods starting) is one message, and
			// messages come minChangedInterval apart at most: each one
			// has the page read the job again.
			wait := max(burstWindow, minChangedInterval-time.Since(lastChanged))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			select {
			case <-changed:
			default:
			}
			lastChanged = time.Now()
			fmt.Fprint(w, "event: changed\ndata: {}\n\n")
		}
		flusher.Flush()
	}
}

// A burst of changes within burstWindow is one message to the page, and
// two messages are minChangedInterval apart at least.
const (
	burstWindow        = 100 * time.Millisecond
	minChangedInterval = time.Second
)

// maySeePods reports whether the user may list the job's pods: a page of a
// user who may not still follows the job's own changes.
func (s *server) maySeePods(ctx context.Context, ns, name string) bool {
	_, err := s.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelJobName + "=" + name, Limit: 1})
	return err == nil
}

// sendRow sends one TrainJob's change to the list: its row, or that it is
// gone.
func (s *server) sendRow(ctx context.Context, w io.Writer, runtimes *job.Runtimes, ev watch.Event) {
	tj, ok := ev.Object.(*trainer.TrainJob)
	if !ok {
		return
	}
	if ev.Type == watch.Deleted {
		data, _ := json.Marshal(map[string]string{"namespace": tj.Namespace, "name": tj.Name})
		fmt.Fprintf(w, "event: gone\ndata: %s\n\n", data)
		return
	}
	data, err := json.Marshal(rowOf(ctx, runtimes, tj, s.clock.Now()))
	if err != nil {
		return
	}
	fmt.Fprintf(w, "event: job\ndata: %s\n\n", data)
}

// RuntimeInfo is a runtime the user may run jobs on, for the form's choice
// and the guide to job types.
type RuntimeInfo struct {
	Name           string `json:"name"`
	Kind           string `json:"kind"`
	Namespace      string `json:"namespace,omitempty"`
	Policy         string `json:"policy"`
	Implementation string `json:"implementation,omitempty"`
	Default        bool   `json:"default"`
}

func (s *server) runtimes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	out := []RuntimeInfo{}
	var cluster trainer.ClusterTrainingRuntimeList
	if err := s.client.List(ctx, &cluster); err != nil && !apierrors.IsForbidden(err) {
		apiError(w, fmt.Errorf("listing ClusterTrainingRuntimes: %w", err))
		return
	}
	for i := range cluster.Items {
		rt := &cluster.Items[i]
		out = append(out, runtimeInfo(rt.Name, trainer.ClusterTrainingRuntimeKind, "", rt.Labels, rt.Annotations, rt.Spec.MLPolicy))
	}
	var local trainer.TrainingRuntimeList
	if err := s.client.List(ctx, &local, client.InNamespace(s.namespaceOf(r))); err == nil {
		for i := range local.Items {
			rt := &local.Items[i]
			if _, copied := rt.Annotations[api.AnnotationRuntimeCopyOf]; copied {
				continue // a job's own copy, not one to choose
			}
			out = append(out, runtimeInfo(rt.Name, trainer.TrainingRuntimeKind, rt.Namespace, rt.Labels, rt.Annotations, rt.Spec.MLPolicy))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
}

func runtimeInfo(name, kind, ns string, labels, annotations map[string]string, p *trainer.MLPolicy) RuntimeInfo {
	ri := RuntimeInfo{Name: name, Kind: kind, Namespace: ns, Policy: policyOf(p), Default: labels[api.LabelDefaultRuntime] != ""}
	if p != nil && p.MPI != nil {
		if impl, err := mpi.ResolveImplementation(ptr.Deref(p.MPI.MPIImplementation, ""), nil, annotations); err == nil {
			ri.Implementation = impl.DisplayName()
		}
	}
	return ri
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) {
	var list kueue.LocalQueueList
	names := []string{}
	if err := s.client.List(r.Context(), &list, client.InNamespace(r.PathValue("ns"))); err == nil {
		for _, q := range list.Items {
			names = append(names, q.Name)
		}
	}
	sort.Strings(names)
	writeJSON(w, http.StatusOK, names)
}

// jobUsage is the CPU and memory each of a job's running pods uses, by
// host, as top reads them; the source says where from, or why none.
func (s *server) jobUsage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tj, err := job.Get(ctx, s.client, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		apiError(w, err)
		return
	}
	byHost := map[string]top.Usage{}
	var podsErr error
	pods, usage, source, err := s.usage.Job(ctx, tj.Namespace, tj.Name, func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := job.Pods(ctx, s.pods.reader(s.client, tj.Namespace, tj.Name), tj)
		podsErr = err
		return pods, err
	})
	if podsErr != nil {
		apiError(w, podsErr)
		return
	}
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"hosts": byHost, "unavailable": err.Error()})
		return
	}
	for i := range pods {
		if u, ok := usage[pods[i].Name]; ok {
			byHost[job.HostOf(&pods[i]).Name()] = u
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"hosts": byHost, "source": source})
}

// form is a job's create form filled from it: clone and modify.
func (s *server) form(w http.ResponseWriter, r *http.Request) {
	tj, err := job.Get(r.Context(), s.client, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		apiError(w, err)
		return
	}
	var copied *trainer.TrainingRuntime
	if _, ok := tj.Annotations[api.AnnotationRuntimeCopyOf]; ok && tj.Spec.RuntimeRef.Kind != nil && *tj.Spec.RuntimeRef.Kind == trainer.TrainingRuntimeKind {
		var rt trainer.TrainingRuntime
		if err := s.client.Get(r.Context(), client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, &rt); err == nil {
			copied = &rt
		}
	}
	f, notes := run.FormOf(tj, copied)
	writeJSON(w, http.StatusOK, map[string]any{"form": f, "notes": notes})
}

// maxForm bounds a create request's body.
const maxForm = 1 << 20

// create checks a form as run does (?dryRun=true: without creating the
// job, through the API server's dry run), and creates the job otherwise.
// Problems come back under the fields they concern, with 422.
func (s *server) create(w http.ResponseWriter, r *http.Request) {
	var f run.Form
	if err := json.NewDecoder(io.LimitReader(r.Body, maxForm)).Decode(&f); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the form is not JSON: " + err.Error()})
		return
	}
	f.Namespace = r.PathValue("ns")
	out := run.SubmitForm(r.Context(), s.client, f, r.URL.Query().Get("dryRun") == "true")
	code := http.StatusOK
	switch {
	case len(out.Errors) > 0:
		code = http.StatusUnprocessableEntity
	case r.URL.Query().Get("dryRun") != "true":
		code = http.StatusCreated
	}
	if out.TrainJob != nil {
		out.TrainJob.ManagedFields = nil
	}
	writeJSON(w, code, out)
}

// delete deletes a job as delete does: its JobSet and pods first.
func (s *server) delete(w http.ResponseWriter, r *http.Request) {
	tj, err := job.Get(r.Context(), s.client, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		apiError(w, err)
		return
	}
	if err := s.client.Delete(r.Context(), tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
		apiError(w, fmt.Errorf("deleting MPI job %s: %w", tj.Name, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": tj.Name})
}
