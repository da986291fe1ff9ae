package main

import (
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// seen tells the tracker that job's JobSet and its Secret appeared at at.
func seen(t *tracker, job string, at time.Time) {
	t.saw(gvrJobSet, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: job}}, at)
	owner := metav1.OwnerReference{Kind: trainer.TrainJobKind, Name: job, Controller: ptr.To(true)}
	t.saw(gvrSecret, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: job + "-mpi-ssh", OwnerReferences: []metav1.OwnerReference{owner}}}, at)
}

func TestTrackerWaitFor(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		complete []string // jobs whose objects both appear, in order
		partial  []string // jobs whose JobSet alone appears
		count    int
		wantErr  bool
		names    []string
		wantLast time.Time
	}{
		{"already reached", []string{"a", "b"}, nil, 2, false, []string{"a", "b"}, base.Add(time.Second)},
		{"a job without its Secret is not complete", []string{"a"}, []string{"b"}, 2, true, []string{"a"}, base},
		{"the last of the named jobs only", []string{"a", "b", "c"}, nil, 3, false, []string{"a", "b"}, base.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker("ns", 10, false)
			for i, j := range tt.complete {
				seen(tr, j, base.Add(time.Duration(i)*time.Second))
			}
			for _, j := range tt.partial {
				tr.saw(gvrJobSet, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: j}}, base)
			}
			err := tr.waitFor(context.Background(), tt.count, 50*time.Millisecond)
			if (err != nil) != tt.wantErr {
				t.Fatalf("waitFor(%d) = %v, want an error: %v", tt.count, err, tt.wantErr)
			}
			if got := tr.lastOf(tt.names); !got.Equal(tt.wantLast) {
				t.Errorf("lastOf(%v) = %v, want %v", tt.names, got, tt.wantLast)
			}
		})
	}
}

// A waiter is woken when the count it waits for is reached later.
func TestTrackerWaitForWakes(t *testing.T) {
	tr := newTracker("ns", 10, false)
	done := make(chan error, 1)
	go func() { done <- tr.waitFor(context.Background(), 2, time.Minute) }()
	seen(tr, "a", time.Now())
	select {
	case err := <-done:
		t.Fatalf("waitFor(2) returned after one job: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	seen(tr, "b", time.Now())
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitFor(2) still waits after the second job")
	}
}
