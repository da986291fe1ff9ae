// Package statusserver serves Kubeflow Trainer's TrainJob status endpoint
// (pkg/trainerstatus): the training pods of a job report its progress,
// time left and metrics, and the server writes them to the TrainJob's
// status.trainerStatus.
//
// A report is taken only from a pod of that very job: the caller's token
// must be a ServiceAccount token bound to a pod, issued for the job's own
// audience (TokenReview decides), and that pod must be in the job's
// namespace and descend from the job (pod → Job → JobSet → TrainJob, by
// controller and UID, as the operator's cache holds them). Whatever the
// pods send, the server holds a bounded amount for each job, takes a
// bounded rate of reports, and writes a job's status at most once per
// write interval, reports in between folded into the next write; the one
// report that says the training is done (100 %) is written at once. With
// each write, the report's numeric metrics join the job's metrics history
// (trainerstatus.History), which the dashboard charts.
package statusserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// Options bound what the server takes and writes.
type Options struct {
	// WriteInterval is the least time between two writes of one job's
	// status.
	WriteInterval time.Duration
	// ReportRate and ReportBurst bound one job's reports, from all its
	// pods together; more are refused with 429.
	ReportRate  float64
	ReportBurst int
	// ReviewRate and ReviewBurst bound the TokenReviews the server asks
	// of the API server, for all jobs: a token it has not seen lately
	// costs one.
	ReviewRate  float64
	ReviewBurst int
	// MaxJobs bounds the jobs the server keeps a record of at once.
	MaxJobs int
}

// DefaultOptions: a status write per job every 10 s at most; 2 reports a
// second per job (a burst of 20, for a job whose every rank reports at
// once); 20 TokenReviews a second.
func DefaultOptions() Options {
	return Options{WriteInterval: 10 * time.Second, ReportRate: 2, ReportBurst: 20, ReviewRate: 20, ReviewBurst: 40, MaxJobs: 10000}
}

// FieldManager owns status.trainerStatus on the TrainJobs the server
// writes.
const FieldManager = "torus-status-server"

// Server is the status endpoint's handler.
type Server struct {
	opts   Options
	client client.Client
	// reader reads pods, Jobs, JobSets and TrainJobs: the operator's
	// cache, which holds the pods and Jobs of Torus's JobSets.
	reader client.Reader
	// api reads the jobs' metrics histories from the API server: the
	// cache holds no ConfigMap's data.
	api  client.Reader
	auth *authenticator
	log  logr.Logger
	now  func() time.Time

	mu   sync.Mutex
	jobs map[types.NamespacedName]*jobRecord
}

// jobRecord is what the server keeps of one job: its reports' limiter, its
// last write and the report waiting for the next.
type jobRecord struct {
	limiter *rate.Limiter
	seen    time.Time
	// waiting: a report waits for the next write (timer set).
	waiting atomic.Bool

	mu        sync.Mutex
	lastWrite time.Time
	pending   *trainer.TrainerStatus
	timer     *time.Timer
	// finished: a report of 100 % was written out of turn.
	finished bool
}

// New builds the handler: c writes statuses and histories and reviews
// tokens, reader reads what the caller's pod descends from, api reads
// histories.
func New(c client.Client, reader, api client.Reader, opts Options, log logr.Logger) *Server {
	return &Server{
		opts: opts, client: c, reader: reader, api: api, log: log, now: time.Now,
		auth: newAuthenticator(c, reader, api, rate.NewLimiter(rate.Limit(opts.ReviewRate), opts.ReviewBurst)),
		jobs: map[types.NamespacedName]*jobRecord{},
	}
}

// ServeHTTP takes one report; its route is trainerstatus.Pattern.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	job := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if r.ContentLength > trainerstatus.MaxBody {
		respond(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprintf("a report is at most %d bytes", trainerstatus.MaxBody))
		return
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="torus"`)
		respond(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "no bearer token: send the job's token ($"+trainerstatus.EnvToken+") as Authorization: Bearer")
		return
	}
	source, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		source = r.RemoteAddr
	}
	if err := s.auth.authorize(r.Context(), token, source, job); err != nil {
		var refused *refusal
		if errors.As(err, &refused) {
			respond(w, refused.code, refused.reason, refused.msg)
			return
		}
		s.log.Error(err, "Authorizing a status report", "trainJob", job)
		respond(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error")
		return
	}
	rec, ok := s.record(job)
	if !ok {
		respond(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the server keeps reports of too many jobs at once; try again later")
		return
	}
	if !rec.limiter.Allow() {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, 1/s.opts.ReportRate))))
		respond(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("more than %g reports a second for this job; report less often (its status is written at most every %s)", s.opts.ReportRate, s.opts.WriteInterval))
		return
	}
	var req trainer.UpdateTrainJobStatusRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, trainerstatus.MaxBody)).Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			respond(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprintf("a report is at most %d bytes", trainerstatus.MaxBody))
			return
		}
		respond(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the body is not an UpdateTrainJobStatusRequest in JSON: "+err.Error())
		return
	}
	if st := req.TrainerStatus; st != nil {
		if msg := trainerstatus.Validate(st); msg != "" {
			respond(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, msg)
			return
		}
		// The time the server took it: the pods' clocks are theirs.
		st.LastUpdatedTime = metav1.NewTime(s.now().UTC().Truncate(time.Second))
		if err := s.report(r.Context(), job, rec, st); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				respond(w, http.StatusNotFound, metav1.StatusReasonNotFound, "TrainJob "+job.String()+" not found")
			case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
				respond(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
			default:
				s.log.Error(err, "Writing a TrainJob's progress", "trainJob", job)
				respond(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error")
			}
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(req)
}

// record is the job's record, made if the server has room.
func (s *Server) record(job types.NamespacedName) (*jobRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if rec, ok := s.jobs[job]; ok {
		rec.seen = now
		return rec, true
	}
	if len(s.jobs) >= s.opts.MaxJobs {
		s.forgetIdle(now)
		if len(s.jobs) >= s.opts.MaxJobs {
			return nil, false
		}
	}
	rec := &jobRecord{limiter: rate.NewLimiter(rate.Limit(s.opts.ReportRate), s.opts.ReportBurst), seen: now}
	s.jobs[job] = rec
	return rec, true
}

// forgetIdle drops the records of jobs that have not reported for a while
// and have no report waiting.
func (s *Server) forgetIdle(now time.Time) {
	idle := max(10*time.Minute, 2*s.opts.WriteInterval)
	for job, rec := range s.jobs {
		if !rec.waiting.Load() && now.Sub(rec.seen) > idle {
			delete(s.jobs, job)
		}
	}
}

// report writes the job's status now, if its last write is a write
// interval old, or keeps it for the write due then.
func (s *Server) report(ctx context.Context, job types.NamespacedName, rec *jobRecord, st *trainer.TrainerStatus) error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if p := st.ProgressPercentage; p != nil && *p == 100 && !rec.finished {
		// The report that the training is done is written at once, once:
		// whoever reads the job when it ends finds it.
		rec.finished = true
		// An earlier report waiting for its turn is older: a flush that
		// has begun finds none.
		if rec.timer != nil && rec.timer.Stop() {
			rec.timer = nil
			rec.waiting.Store(false)
		}
		rec.pending = nil
		return s.write(ctx, job, rec, st)
	}
	if wait := rec.lastWrite.Add(s.opts.WriteInterval).Sub(s.now()); wait > 0 || rec.timer != nil {
		rec.pending = st
		if rec.timer == nil {
			rec.waiting.Store(true)
			rec.timer = time.AfterFunc(wait, func() { s.flush(job, rec) })
		}
		return nil
	}
	return s.write(ctx, job, rec, st)
}

// flush writes the report kept for the job's next write.
func (s *Server) flush(job types.NamespacedName, rec *jobRecord) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.timer = nil
	defer rec.waiting.Store(false)
	st := rec.pending
	rec.pending = nil
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	// Another replica of the operator may have taken, and written, a newer
	// report meanwhile (the pods' reports reach either through the
	// Service): an older one never replaces it.
	var tj trainer.TrainJob
	if err := s.reader.Get(ctx, job, &tj); err == nil && newer(tj.Status.TrainerStatus, st) {
		return
	}
	if err := s.write(ctx, job, rec, st); err != nil && !apierrors.IsNotFound(err) {
		s.log.Error(err, "Writing a TrainJob's progress", "trainJob", job)
	}
}

// writeTimeout bounds one write of a job's status.
const writeTimeout = 10 * time.Second

// newer says whether the status holds a report that st must not replace:
// one taken later, or in the same second and as far along (the report
// times are whole seconds).
func newer(cur, st *trainer.TrainerStatus) bool {
	if cur == nil {
		return false
	}
	c, t := cur.LastUpdatedTime.Time, st.LastUpdatedTime.Time
	if c.After(t) {
		return true
	}
	return c.Equal(t) && cur.ProgressPercentage != nil && (st.ProgressPercentage == nil || *cur.ProgressPercentage >= *st.ProgressPercentage)
}

// write applies the report to the job's status.trainerStatus. Called with
// rec.mu held; the write counts against the interval whether or not it
// succeeds.
func (s *Server) write(ctx context.Context, job types.NamespacedName, rec *jobRecord, st *trainer.TrainerStatus) error {
	rec.lastWrite = s.now()
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	patch, err := json.Marshal(map[string]any{
		"apiVersion": trainer.GroupVersion.String(),
		"kind":       trainer.TrainJobKind,
		"metadata":   map[string]string{"name": job.Name, "namespace": job.Namespace},
		"status":     map[string]any{"trainerStatus": st},
	})
	if err != nil {
		return err
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace}}
	if err := s.client.Status().Patch(ctx, tj, client.RawPatch(types.ApplyPatchType, patch), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	// The chart is a view of the reports: a history that cannot be
	// written loses a point, never the report.
	if err := s.recordHistory(ctx, tj, st); err != nil {
		s.log.Error(err, "Recording a TrainJob's metrics history", "trainJob", job)
	}
	return nil
}

// respond answers with a metav1.Status, as the API server and upstream's
// status server do.
func respond(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}
