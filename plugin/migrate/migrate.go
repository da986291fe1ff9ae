package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	sigsjson "sigs.k8s.io/json"
)

// MPIJobAPIVersion is the only MPIJob version converted.
var MPIJobAPIVersion = kubeflow.SchemeGroupVersion.String()

// Item is one document of an input and what became of it.
type Item struct {
	// Source names where the document came from: a file name, "<stdin>",
	// or "cluster".
	Source string
	// Line is the document's first line in Source, from 1; 0 when the
	// document has no text (read from a cluster).
	Line int

	APIVersion, Kind, Namespace, Name string

	// Raw is the document's text as read when it is written out unchanged
	// (YAML sources only).
	Raw []byte
	// Object is the decoded document; nil when it did not decode.
	Object map[string]any
	// Blank marks a document of comments only, kept as written.
	Blank bool
	// HeadComment is the comment block a converted YAML document opened
	// with; it is written above the conversion.
	HeadComment string

	// Result is set for MPIJobs; its TrainJob is nil when conversion failed.
	Result *Result
	// Findings are the document's, with lines, parse problems first.
	Findings []Finding

	list *listGroup
}

// listGroup ties the items of one List document back together.
type listGroup struct {
	apiVersion, kind string
	line             int
}

// Converted reports whether the item became a TrainJob.
func (it *Item) Converted() bool { return it.Result != nil && it.Result.TrainJob != nil }

// Failed reports whether the item has an error finding.
func (it *Item) Failed() bool { return countLevel(it.Findings, LevelError) > 0 }

// Describe names the document for messages: kind and namespaced name.
func (it *Item) Describe() string {
	name := it.Name
	if it.Namespace != "" && name != "" {
		name = it.Namespace + "/" + name
	}
	switch {
	case it.Kind != "" && name != "":
		return it.Kind + " " + name
	case it.Kind != "":
		return it.Kind
	default:
		return "document"
	}
}

// FormatFinding renders a finding as file:line: what: level: field: message.
func (it *Item) FormatFinding(f Finding) string {
	loc := it.Source
	if f.Line > 0 {
		loc += ":" + fmt.Sprint(f.Line)
	}
	return loc + ": " + it.Describe() + ": " + f.String()
}

// countItems tallies findings of a level over items.
func countItems(items []*Item, l Level) int {
	n := 0
	for _, it := range items {
		n += countLevel(it.Findings, l)
	}
	return n
}

// File reads every document of a manifest file (YAML, multi-document
// YAML, JSON, Lists) and converts the MPIJobs in it. A malformed document
// becomes an item with an error at its line; the file's other documents
// are still read.
func File(source string, data []byte, opts Options) []*Item {
	docs, err := splitDocuments(data)
	var items []*Item
	for _, d := range docs {
		items = append(items, document(source, d, opts)...)
	}
	if err != nil {
		it := &Item{Source: source}
		var le *locatedError
		line := 0
		if errors.As(err, &le) {
			line = le.Line
		}
		it.Line = line
		it.Findings = []Finding{{Level: LevelError, Message: err.Error(), Line: line}}
		items = append(items, it)
	}
	return items
}

// convertObject converts one object read from a cluster (or built in memory).
func convertObject(source string, obj map[string]any, opts Options) *Item {
	data, err := json.Marshal(obj)
	if err != nil {
		it := &Item{Source: source, Object: obj}
		it.Findings = []Finding{{Level: LevelError, Message: fmt.Sprintf("encoding the object: %v", err)}}
		return it
	}
	items := document(source, rawDoc{text: data, json: true}, opts)
	return items[0]
}

func document(source string, d rawDoc, opts Options) []*Item {
	it := &Item{Source: source, Line: d.line}
	if !d.json && isBlank(d.text) {
		if headComment(d.text) == "" {
			return nil
		}
		it.Blank, it.Raw = true, d.text
		return []*Item{it}
	}
	data, err := toJSON(d)
	if err != nil {
		var le *locatedError
		if errors.As(err, &le) {
			it.Findings = append(it.Findings, Finding{Level: LevelError, Message: le.Error(), Line: le.Line})
		} else {
			it.Findings = append(it.Findings, Finding{Level: LevelError, Message: err.Error(), Line: d.line})
		}
		return []*Item{it}
	}
	var loc *locator
	if d.line > 0 {
		loc = newLocator(d.text, d.line)
	}
	obj, err := decodeObject(data)
	if err != nil || obj == nil {
		if string(data) == "null" {
			return nil
		}
		it.Findings = append(it.Findings, Finding{Level: LevelError, Line: d.line,
			Message: "not a Kubernetes object: a document must be a mapping with apiVersion and kind"})
		return []*Item{it}
	}
	if !d.json {
		it.Raw = d.text
	}
	if items, ok := listItems(source, d, obj, loc, opts); ok {
		return items
	}
	decode(it, obj, data, loc, nil, opts)
	if it.Converted() && !d.json {
		it.HeadComment = headComment(d.text)
		if loc.commentLines() > strings.Count(it.HeadComment, "\n") {
			it.Findings = append([]Finding{{Level: LevelNote, Line: d.line,
				Message: "comments inside the MPIJob are not carried over to the TrainJob; its opening comments are"}}, it.Findings...)
		}
	}
	return []*Item{it}
}

// listItems expands a List (kind List, or MPIJobList) holding MPIJobs into
// items; a List without MPIJobs passes through whole.
func listItems(source string, d rawDoc, obj map[string]any, loc *locator, opts Options) ([]*Item, bool) {
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	raw, ok := obj["items"].([]any)
	if !ok || !strings.HasSuffix(kind, "List") {
		return nil, false
	}
	isMPIJobList := kind == kubeflow.Kind+"List" && apiVersion == MPIJobAPIVersion
	hasMPIJob := false
	for _, x := range raw {
		if m, ok := x.(map[string]any); ok {
			if m["kind"] == kubeflow.Kind || (isMPIJobList && m["kind"] == nil) {
				hasMPIJob = true
			}
		}
	}
	if !hasMPIJob {
		return nil, false
	}
	group := &listGroup{apiVersion: apiVersion, kind: kind, line: d.line}
	items := make([]*Item, 0, len(raw))
	for i, x := range raw {
		prefix := newPath("items").Index(i)
		it := &Item{Source: source, Line: loc.line(prefix), list: group}
		m, ok := x.(map[string]any)
		if !ok {
			it.Findings = append(it.Findings, Finding{Level: LevelError, Line: it.Line, Message: "list item is not a Kubernetes object"})
			items = append(items, it)
			continue
		}
		if isMPIJobList {
			if m["apiVersion"] == nil {
				m["apiVersion"] = MPIJobAPIVersion
			}
			if m["kind"] == nil {
				m["kind"] = kubeflow.Kind
			}
		}
		data, err := json.Marshal(m)
		if err != nil {
			it.Findings = append(it.Findings, Finding{Level: LevelError, Line: it.Line, Message: fmt.Sprintf("encoding list item: %v", err)})
			items = append(items, it)
			continue
		}
		decode(it, m, data, loc, prefix, opts)
		items = append(items, it)
	}
	if kind != "List" {
		items[0].Findings = append(items[0].Findings, Finding{Level: LevelNote, Line: d.line,
			Message: fmt.Sprintf("%s written as a v1 List: it now holds TrainJobs and runtimes", kind)})
	}
	return items, true
}

// decode fills an item from one object: an MPIJob is converted, anything
// else passes through.
func decode(it *Item, obj map[string]any, data []byte, loc *locator, prefix fieldPath, opts Options) {
	it.Object = obj
	it.APIVersion, _ = obj["apiVersion"].(string)
	it.Kind, _ = obj["kind"].(string)
	if md, ok := obj["metadata"].(map[string]any); ok {
		it.Name, _ = md["name"].(string)
		it.Namespace, _ = md["namespace"].(string)
	}
	at := func(p fieldPath) int {
		if loc == nil {
			return 0
		}
		return loc.line(append(append(fieldPath{}, prefix...), p...))
	}
	switch {
	case it.APIVersion == "" || it.Kind == "":
		it.Findings = append(it.Findings, Finding{Level: LevelWarning, Line: at(nil),
			Message: "has no apiVersion or kind, so it is not a Kubernetes object: passed through unchanged"})
		return
	case it.Kind != kubeflow.Kind:
		it.Findings = append(it.Findings, Finding{Level: LevelNote, Line: at(nil),
			Message: "not an MPIJob: passed through unchanged"})
		return
	case it.APIVersion != MPIJobAPIVersion:
		it.Findings = append(it.Findings, Finding{Level: LevelWarning, Line: at(nil),
			Message: fmt.Sprintf("MPIJob %s is not converted (only %s is): passed through unchanged", it.APIVersion, MPIJobAPIVersion)})
		return
	}

	var job kubeflow.MPIJob
	strictErrs, err := sigsjson.UnmarshalStrict(data, &job)
	if err != nil {
		p, msg := decodeErrorField(err)
		it.Findings = append(it.Findings, Finding{Level: LevelError, Field: p.String(), Line: at(p), Message: msg})
		it.Result = &Result{}
		return
	}
	for _, se := range strictErrs {
		p, msg := strictErrorField(se)
		it.Findings = append(it.Findings, Finding{Level: LevelWarning, Field: p.String(), Line: at(p), Message: msg})
	}
	res := convertJob(&job, opts)
	for _, f := range res.Findings {
		f.Line = at(f.path)
		it.Findings = append(it.Findings, f)
	}
	res.Findings = nil
	it.Result = res
	sort.SliceStable(it.Findings, func(i, j int) bool { return it.Findings[i].Line < it.Findings[j].Line })
}

var (
	quotedField   = regexp.MustCompile(`"([^"]+)"`)
	goStructField = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.(\S+) of type (\S+)`)
)

// strictErrorField reads the field an unknown- or duplicate-field error
// names.
func strictErrorField(err error) (fieldPath, string) {
	msg := err.Error()
	m := quotedField.FindStringSubmatch(msg)
	if m == nil {
		return nil, msg
	}
	p := parseFieldPath(m[1])
	switch {
	case strings.HasPrefix(msg, "unknown field"):
		return p, "unknown field: not part of MPIJob " + MPIJobAPIVersion + ", so mpi-operator never saw it; dropped"
	case strings.HasPrefix(msg, "duplicate field"):
		return p, "duplicate field: the last value is used, as the API server would"
	}
	return p, msg
}

// decodeErrorField reads the field a JSON type error is about.
func decodeErrorField(err error) (fieldPath, string) {
	msg := err.Error()
	if m := goStructField.FindStringSubmatch(msg); m != nil {
		return parseFieldPath(m[1]), fmt.Sprintf("malformed MPIJob: wrong type, want %s (%s)", m[2], strings.TrimPrefix(msg, "json: "))
	}
	return nil, "malformed MPIJob: " + strings.TrimPrefix(msg, "json: ")
}

// decodeObject decodes a JSON object keeping numbers as written.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}
