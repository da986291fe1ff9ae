package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// mutating are the verbs of apiserver_request_total that write.
var mutating = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// readServerWrites reads the API server's writes so far from its metrics
// (apiserver_request_total), by resource and verb ("pods POST",
// "pods/binding POST", "trainjobs/status PATCH"); dry runs and refused
// requests are not writes. On a small machine a burst of jobs waits on the
// API server and etcd, and these say what each contender asked them to
// store.
func readServerWrites(ctx context.Context, cs kubernetes.Interface) (counts, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseServerWrites(raw)
}

// parseServerWrites reads the writes from the API server's metrics.
func parseServerWrites(raw []byte) (counts, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	w := counts{}
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

// writesSince is the API server's writes since before.
func writesSince(ctx context.Context, cs kubernetes.Interface, before counts) (counts, error) {
	now, err := readServerWrites(ctx, cs)
	if err != nil {
		return nil, err
	}
	return now.minus(before), nil
}
