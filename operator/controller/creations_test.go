package controller

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCreations(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	job := client.ObjectKey{Namespace: "ns", Name: "pi"}
	other := client.ObjectKey{Namespace: "ns", Name: "other"}
	tests := map[string]struct {
		steps func(c *creations)
		kind  string
		job   client.ObjectKey
		run   int32
		at    time.Time
		want  bool
	}{
		"keys of another run": {steps: func(c *creations) { c.created(childSecret, job, 0, t0) }, kind: childSecret, job: job, run: 1, at: t0, want: false},
		"keys of this run":    {steps: func(c *creations) { c.created(childSecret, job, 1, t0) }, kind: childSecret, job: job, run: 1, at: t0, want: true},
		"nothing created":     {steps: func(*creations) {}, kind: childJobSet, job: job, at: t0, want: false},
		"created, unseen":     {steps: func(c *creations) { c.created(childJobSet, job, 0, t0) }, kind: childJobSet, job: job, at: t0.Add(time.Second), want: true},
		"another kind":        {steps: func(c *creations) { c.created(childJobSet, job, 0, t0) }, kind: childSecret, job: job, at: t0, want: false},
		"another job":         {steps: func(c *creations) { c.created(childJobSet, job, 0, t0) }, kind: childJobSet, job: other, at: t0, want: false},
		"seen in cache":       {steps: func(c *creations) { c.created(childSecret, job, 0, t0); c.seen(childSecret, job) }, kind: childSecret, job: job, at: t0, want: false},
		"past the TTL":        {steps: func(c *creations) { c.created(childConfigMap, job, 0, t0) }, kind: childConfigMap, job: job, at: t0.Add(creationTTL + time.Second), want: false},
		"job gone":            {steps: func(c *creations) { c.created(childConfigMap, job, 0, t0); c.forget(job) }, kind: childConfigMap, job: job, at: t0, want: false},
		"created again": {steps: func(c *creations) {
			c.created(childSecret, job, 0, t0)
			c.seen(childSecret, job)
			c.created(childSecret, job, 0, t0)
		}, kind: childSecret, job: job, at: t0, want: true},
		"at the TTL still": {steps: func(c *creations) { c.created(childJobSet, job, 0, t0) }, kind: childJobSet, job: job, at: t0.Add(creationTTL), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c creations
			tc.steps(&c)
			if got := c.pending(tc.kind, tc.job, tc.run, tc.at); got != tc.want {
				t.Errorf("pending(%s, %s) = %t, want %t", tc.kind, tc.job, got, tc.want)
			}
		})
	}
}
