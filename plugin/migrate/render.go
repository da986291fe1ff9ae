package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// outputFormat is an output format.
type outputFormat string

const (
	formatYAML outputFormat = "yaml"
	formatJSON outputFormat = "json"
)

// outputFormats lists the output formats.
var outputFormats = []outputFormat{formatYAML, formatJSON}

// Outputs are the objects an item contributes to the output, in order: a
// generated runtime before the TrainJob that refers to it; a pass-through
// document as it was decoded. Failed items contribute nothing.
func (it *Item) Outputs() ([]map[string]any, error) {
	switch {
	case it.Failed() || it.Blank:
		return nil, nil
	case it.Converted():
		var out []map[string]any
		if it.Result.Runtime != nil {
			m, err := toMap(it.Result.Runtime)
			if err != nil {
				return nil, fmt.Errorf("encoding TrainingRuntime %s: %w", it.Result.Runtime.Name, err)
			}
			out = append(out, m)
		}
		m, err := toMap(it.Result.TrainJob)
		if err != nil {
			return nil, fmt.Errorf("encoding TrainJob %s: %w", it.Result.TrainJob.Name, err)
		}
		return append(out, m), nil
	case it.Object != nil:
		return []map[string]any{it.Object}, nil
	}
	return nil, nil
}

// Created are the objects an --apply creates for the item: the runtime and
// the TrainJob of a converted MPIJob. Pass-through documents are not
// created.
func (it *Item) Created() ([]*unstructured.Unstructured, error) {
	if !it.Converted() {
		return nil, nil
	}
	objs, err := it.Outputs()
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out, nil
}

// toMap encodes a typed object as JSON would, without the noise of empty
// server-set fields (null creationTimestamps, empty status and resources).
func toMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	prune(m)
	return m, nil
}

// prune drops null values and empty maps under keys where empty means
// unset; other empty maps (emptyDir: {}) carry meaning and stay.
func prune(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil || (k == "divisor" && fmt.Sprint(x) == "0") {
				delete(t, k)
				continue
			}
			prune(x)
			if m, ok := x.(map[string]any); ok && len(m) == 0 {
				switch k {
				case "metadata", "status", "resources", "spec", "template":
					delete(t, k)
				}
			}
		}
	case []any:
		for _, x := range t {
			prune(x)
		}
	}
}

// writeYAML writes the items as a YAML stream: converted jobs (opening
// comments first), pass-through documents as they were written, the items
// of a List as one List.
func writeYAML(w io.Writer, items []*Item) error {
	var buf bytes.Buffer
	first := true
	sep := func() {
		if !first {
			buf.WriteString("---\n")
		}
		first = false
	}
	writeObj := func(o any) error {
		data, err := yamlv2.Marshal(yamlValue(o))
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		buf.Write(data)
		return nil
	}
	for i := 0; i < len(items); i++ {
		it := items[i]
		if it.list != nil {
			group := it.list
			list := map[string]any{"apiVersion": "v1", "kind": "List"}
			var objs []any
			for ; i < len(items) && items[i].list == group; i++ {
				outs, err := items[i].Outputs()
				if err != nil {
					return err
				}
				for _, o := range outs {
					objs = append(objs, o)
				}
			}
			i--
			list["items"] = objs
			if objs == nil {
				list["items"] = []any{}
			}
			sep()
			if err := writeObj(list); err != nil {
				return err
			}
			continue
		}
		if it.Failed() {
			continue
		}
		if it.Blank || (!it.Converted() && it.Raw != nil) {
			sep()
			buf.Write(it.Raw)
			if n := len(it.Raw); n > 0 && it.Raw[n-1] != '\n' {
				buf.WriteByte('\n')
			}
			continue
		}
		outs, err := it.Outputs()
		if err != nil {
			return err
		}
		for j, o := range outs {
			sep()
			if j == 0 && it.HeadComment != "" {
				buf.WriteString(it.HeadComment)
			}
			if err := writeObj(o); err != nil {
				return err
			}
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// writeJSON writes the items' objects as one JSON object, or as a v1 List
// when there are several. Comments do not survive JSON.
func writeJSON(w io.Writer, items []*Item) error {
	var objs []any
	for _, it := range items {
		outs, err := it.Outputs()
		if err != nil {
			return err
		}
		for _, o := range outs {
			objs = append(objs, o)
		}
	}
	var v any
	switch len(objs) {
	case 1:
		v = objs[0]
	default:
		if objs == nil {
			objs = []any{}
		}
		v = map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
	}
	data, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// write writes items in a format.
func write(w io.Writer, items []*Item, f outputFormat) error {
	if f == formatJSON {
		return writeJSON(w, items)
	}
	return writeYAML(w, items)
}

// yamlValue copies a decoded JSON value for the YAML encoder, turning
// json.Numbers into numbers, so that the output is what sigs.k8s.io/yaml
// writes for the same JSON without encoding and parsing it once more.
func yamlValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = yamlValue(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = yamlValue(x)
		}
		return l
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return u
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return string(t)
	default:
		return v
	}
}
