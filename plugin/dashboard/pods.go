package dashboard

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/plugin/job"
)

// jobPods holds, for each job a page has open, the job's pods as one list
// and watch, which the page's reads share (its view, its usage): a change
// to one pod of a job of thousands then costs the API server no new list.
// A feed lives while a page's watch of the job is open.
type jobPods struct {
	kube kubernetes.Interface

	mu    sync.Mutex
	feeds map[types.NamespacedName]*podFeed
}

// podFeed is one job's pods, kept by an informer, and the pages to tell
// when they change.
type podFeed struct {
	store    cache.Store
	informer cache.Controller
	stop     chan struct{}
	selector string

	mu          sync.Mutex
	subscribers map[chan<- struct{}]struct{}
}

func newJobPods(kube kubernetes.Interface) *jobPods {
	return &jobPods{kube: kube, feeds: map[types.NamespacedName]*podFeed{}}
}

// subscribe opens (or shares) the feed of a job's pods; changed gets a
// value, without blocking, whenever one of them changes. It returns a
// function that ends the subscription, and the feed with its last one, and
// what is done once the feed has listed the pods.
func (j *jobPods) subscribe(ns, name string, changed chan<- struct{}) (unsubscribe func(), synced cache.DoneChecker) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	j.mu.Lock()
	f, ok := j.feeds[key]
	if !ok {
		f = j.start(ns, name)
		j.feeds[key] = f
	}
	j.mu.Unlock()
	f.mu.Lock()
	f.subscribers[changed] = struct{}{}
	f.mu.Unlock()
	unsubscribe = func() {
		f.mu.Lock()
		delete(f.subscribers, changed)
		last := len(f.subscribers) == 0
		f.mu.Unlock()
		if !last {
			return
		}
		j.mu.Lock()
		if j.feeds[key] == f {
			delete(j.feeds, key)
		}
		j.mu.Unlock()
		close(f.stop)
	}
	return unsubscribe, f.informer.HasSyncedChecker()
}

func (j *jobPods) start(ns, name string) *podFeed {
	f := &podFeed{stop: make(chan struct{}), selector: api.LabelJobName + "=" + name, subscribers: map[chan<- struct{}]struct{}{}}
	pods := j.kube.CoreV1().Pods(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = f.selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = f.selector
			return pods.Watch(ctx, o)
		},
	}
	notify := func(any) { f.notify() }
	f.store, f.informer = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, o any) { notify(o) },
			DeleteFunc: notify,
		},
	})
	go f.informer.Run(f.stop)
	return f
}

func (f *podFeed) notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.subscribers {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// reader is c, with the job's pods read from its feed when a page has it
// open and it has listed them; otherwise c itself.
func (j *jobPods) reader(c client.Reader, ns, name string) client.Reader {
	r, _ := j.viewReader(c, ns, name)
	return r
}

// viewReader is reader, and for a view of every host the Tables to glance
// at the job's pods with (job.GlancePods) when no feed holds them: a feed
// answers from memory, and before it has listed them a glance answers a
// job of thousands sooner than a list of every pod.
func (j *jobPods) viewReader(c client.Reader, ns, name string) (client.Reader, job.PodTables) {
	j.mu.Lock()
	f := j.feeds[types.NamespacedName{Namespace: ns, Name: name}]
	j.mu.Unlock()
	if f == nil || !f.informer.HasSynced() {
		return c, job.NewPodTables(j.kube)
	}
	return &feedReader{Reader: c, feed: f, namespace: ns}, nil
}

// feedReader serves the list of one job's pods from its feed: copies, or,
// for a read-only caller (client.UnsafeDisableDeepCopy), the feed's own
// pods, which spares a deep copy of every pod of a job of thousands on
// every read of its view.
type feedReader struct {
	client.Reader
	feed      *podFeed
	namespace string
}

func (r *feedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if !ok || o.Namespace != r.namespace || o.LabelSelector == nil || o.LabelSelector.String() != r.feed.selector ||
		o.FieldSelector != nil || o.Limit != 0 || o.Continue != "" {
		return r.Reader.List(ctx, list, opts...)
	}
	items := r.feed.store.List()
	pods.Items = make([]corev1.Pod, 0, len(items))
	for _, it := range items {
		p := it.(*corev1.Pod)
		if !ptr.Deref(o.UnsafeDisableDeepCopy, false) {
			p = p.DeepCopy()
		}
		pods.Items = append(pods.Items, *p)
	}
	return nil
}
