package dashboard

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
)

// delegate records the lists a feedReader passes on.
type delegate struct {
	client.Reader
	lists int
}

func (d *delegate) List(context.Context, client.ObjectList, ...client.ListOption) error {
	d.lists++
	return nil
}

// The feed answers only the list of its own job's pods; every other list
// goes to the API server.
func TestFeedReader(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, name := range []string{"pi-launcher", "pi-worker-0"} {
		if err := store.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	own := client.MatchingLabels{api.LabelJobName: "pi"}
	tests := map[string]struct {
		list     client.ObjectList
		opts     []client.ListOption
		fromFeed bool
	}{
		"the job's pods":                {list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace("ns"), own}, fromFeed: true},
		"another job's pods":            {list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace("ns"), client.MatchingLabels{api.LabelJobName: "pi2"}}},
		"the job's pods, another place": {list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace("other"), own}},
		"every pod of the namespace":    {list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace("ns")}},
		"the job's pods, one page":      {list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace("ns"), own, client.Limit(1)}},
		"the job's pods, by field":      {list: &corev1.PodList{}, opts: []client.ListOption{client.InNamespace("ns"), own, client.MatchingFields{"spec.nodeName": "n"}}},
		"the job's events":              {list: &corev1.EventList{}, opts: []client.ListOption{client.InNamespace("ns"), own}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &delegate{}
			r := &feedReader{Reader: d, feed: &podFeed{store: store, selector: api.LabelJobName + "=pi"}, namespace: "ns"}
			if err := r.List(context.Background(), tc.list, tc.opts...); err != nil {
				t.Fatal(err)
			}
			if got := d.lists == 0; got != tc.fromFeed {
				t.Fatalf("served from the feed: %t, want %t", got, tc.fromFeed)
			}
			if pods, ok := tc.list.(*corev1.PodList); ok && tc.fromFeed && len(pods.Items) != 2 {
				t.Errorf("pods from the feed: %d, want 2", len(pods.Items))
			}
		})
	}
}

// piFeed reads store as the feed of job pi in namespace ns, with the
// options of a list of that job's pods.
func piFeed(store cache.Store) (*feedReader, []client.ListOption) {
	r := &feedReader{Reader: &delegate{}, feed: &podFeed{store: store, selector: api.LabelJobName + "=pi"}, namespace: "ns"}
	return r, []client.ListOption{client.InNamespace("ns"), client.MatchingLabels{api.LabelJobName: "pi"}}
}

// A caller that may write what it reads gets copies; a read-only one
// (client.UnsafeDisableDeepCopy) gets the feed's own pods.
func TestFeedReaderCopies(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi-launcher", Labels: map[string]string{"k": "v"}}}); err != nil {
		t.Fatal(err)
	}
	r, opts := piFeed(store)
	for _, tc := range []struct {
		name   string
		opts   []client.ListOption
		shared bool
	}{{"copies", opts, false}, {"read-only", append(opts, client.UnsafeDisableDeepCopy), true}} {
		t.Run(tc.name, func(t *testing.T) {
			var pods corev1.PodList
			if err := r.List(context.Background(), &pods, tc.opts...); err != nil {
				t.Fatal(err)
			}
			stored, _, _ := store.GetByKey("ns/pi-launcher")
			want := stored.(*corev1.Pod).Labels
			if got := reflect.ValueOf(pods.Items[0].Labels).UnsafePointer() == reflect.ValueOf(want).UnsafePointer(); got != tc.shared {
				t.Errorf("shares the feed's pod: %t, want %t", got, tc.shared)
			}
		})
	}
}

// BenchmarkFeedList is one read of a 16,384-worker job's pods from an open
// page's feed, as its view and its usage read them.
func BenchmarkFeedList(b *testing.B) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range 16384 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi-node-0-" + strconv.Itoa(i) + "-abcde", Labels: map[string]string{
				api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": strconv.Itoa(i),
			}},
			Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "node", Image: "mpi", Command: []string{"sleep", "600"}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "node", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
		}
		if err := store.Add(p); err != nil {
			b.Fatal(err)
		}
	}
	r, opts := piFeed(store)
	for _, tc := range []struct {
		name string
		opts []client.ListOption
	}{{"copies", opts}, {"shared", append(opts, client.UnsafeDisableDeepCopy)}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				var pods corev1.PodList
				if err := r.List(context.Background(), &pods, tc.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// synced is an informer that has listed its pods.
type synced struct{ cache.Controller }

func (synced) HasSynced() bool { return true }

// A job page's view reads the job's pods from its open feed, once the feed
// has listed them; before that, it glances at them through the API server.
func TestViewReader(t *testing.T) {
	j := newJobPods(nil)
	c := &delegate{}
	r, tables := j.viewReader(c, "ns", "pi")
	if r != client.Reader(c) || tables == nil {
		t.Errorf("without a feed: reader %T, tables %v; want the API client and tables", r, tables)
	}
	j.feeds[types.NamespacedName{Namespace: "ns", Name: "pi"}] = &podFeed{store: cache.NewStore(cache.MetaNamespaceKeyFunc), informer: synced{}, selector: api.LabelJobName + "=pi"}
	r, tables = j.viewReader(c, "ns", "pi")
	if _, ok := r.(*feedReader); !ok || tables != nil {
		t.Errorf("with a listed feed: reader %T, tables %v; want the feed and no tables", r, tables)
	}
	if r, tables = j.viewReader(c, "ns", "pi2"); r != client.Reader(c) || tables == nil {
		t.Errorf("another job's view: reader %T, tables %v; want the API client and tables", r, tables)
	}
}
