package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// serverWrites are the API server's writes so far, from its
// apiserver_request_total, by resource and verb ("pods POST",
// "pods/binding POST", "trainjobs/status PATCH"); dry runs and refused requests are not writes. On a small machine a burst
// of jobs waits on the API server and etcd, and these say what each
// contender asked them to store.
type serverWrites map[string]float64

// mutating are the verbs of apiserver_request_total that write.
var mutating = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// readServerWrites reads the API server's writes so far from its metrics.
func readServerWrites(ctx context.Context, cs kubernetes.Interface) (serverWrites, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseServerWrites(raw)
}

// parseServerWrites reads the writes from the API server's metrics.
func parseServerWrites(raw []byte) (serverWrites, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	w := serverWrites{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		// A refused request stored nothing.
		if !mutating[labels["verb"]] || labels["dry_run"] != "" || !strings.HasPrefix(labels["code"], "2") {
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		w[key+" "+labels["verb"]] += m.GetCounter().GetValue()
	}
	return w, nil
}

// minus is the writes since before.
func (w serverWrites) minus(before serverWrites) serverWrites {
	d := serverWrites{}
	for k, v := range w {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func (w serverWrites) total() float64 {
	var t float64
	for _, v := range w {
		t += v
	}
	return t
}

// String lists the writes, most first: "pods POST 900, pods/binding POST 900".
func (w serverWrites) String() string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if w[keys[i]] != w[keys[j]] {
			return w[keys[i]] > w[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, w[k])
	}
	return strings.Join(parts, ", ")
}

// writesSince is the API server's writes since before.
func writesSince(ctx context.Context, cs kubernetes.Interface, before serverWrites) (serverWrites, error) {
	now, err := readServerWrites(ctx, cs)
	if err != nil {
		return nil, err
	}
	return now.minus(before), nil
}
