package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// rawDoc is one document of a manifest file as written.
type rawDoc struct {
	// line is the document's first line in the file, from 1.
	line int
	text []byte
	json bool
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// splitDocuments cuts a manifest file into documents: a JSON stream (one
// or more objects, or an array of them) or YAML documents separated by
// "---" lines. A JSON syntax error ends the file; its line is returned.
func splitDocuments(data []byte) ([]rawDoc, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(data)
	}
	return splitYAML(data), nil
}

func splitYAML(data []byte) []rawDoc {
	var docs []rawDoc
	var cur bytes.Buffer
	start, line := 1, 0
	flush := func(next int) {
		if cur.Len() > 0 {
			docs = append(docs, rawDoc{line: start, text: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
		start = next
	}
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		content := bytes.TrimRight(l, "\r\n")
		switch {
		case isDocumentStart(content):
			flush(line + 1)
			// Content after "--- " (a flow or block scalar) belongs to the
			// document; a comment there is kept with it too.
			if rest := bytes.TrimSpace(content[3:]); len(rest) > 0 {
				start = line
				cur.WriteString(string(rest) + "\n")
			}
		case bytes.Equal(content, []byte("...")):
			flush(line + 1)
			// Directives or nothing may follow until the next "---".
		default:
			cur.Write(l)
		}
	}
	if cur.Len() > 0 {
		docs = append(docs, rawDoc{line: start, text: bytes.Clone(cur.Bytes())})
	}
	return docs
}

func isDocumentStart(l []byte) bool {
	return bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t')
}

func splitJSON(data []byte) ([]rawDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []rawDoc
	next := func() (rawDoc, error) {
		start := skipSpace(data, int(dec.InputOffset()))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return rawDoc{}, jsonError(data, start, err)
		}
		return rawDoc{line: lineAt(data, start), text: raw, json: true}, nil
	}
	for {
		start := skipSpace(data, int(dec.InputOffset()))
		if start >= len(data) {
			return docs, nil
		}
		if data[start] != '[' {
			d, err := next()
			if err != nil {
				return docs, err
			}
			docs = append(docs, d)
			continue
		}
		if _, err := dec.Token(); err != nil {
			return docs, jsonError(data, start, err)
		}
		for dec.More() {
			d, err := next()
			if err != nil {
				return docs, err
			}
			docs = append(docs, d)
		}
		if _, err := dec.Token(); err != nil {
			return docs, jsonError(data, int(dec.InputOffset()), err)
		}
	}
}

// locatedError is an error at a line of a source.
type locatedError struct {
	Line int
	Err  error
}

func (e *locatedError) Error() string { return e.Err.Error() }
func (e *locatedError) Unwrap() error { return e.Err }

func jsonError(data []byte, start int, err error) error {
	off := start
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		off = int(se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		off = len(data)
		err = errors.New("unexpected end of JSON input")
	}
	return &locatedError{Line: lineAt(data, off), Err: fmt.Errorf("malformed JSON: %w", err)}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n' || data[i] == ',') {
		i++
	}
	return i
}

func lineAt(data []byte, off int) int {
	off = min(off, len(data))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// isBlank reports whether a YAML document holds only comments, directives
// and blank lines.
func isBlank(text []byte) bool {
	for _, l := range bytes.Split(text, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' && l[0] != '%' {
			return false
		}
	}
	return true
}

// headComment is the run of comment and blank lines a YAML document opens
// with.
func headComment(text []byte) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(text), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && t[0] != '#' {
			break
		}
		if t != "" {
			b.WriteString(strings.TrimRight(l, "\r\n") + "\n")
		}
	}
	return b.String()
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// toJSON converts a YAML document as kubectl does (YAML 1.1 scalars,
// duplicate keys refused), mapping the parser's line to the file's.
func toJSON(d rawDoc) ([]byte, error) {
	if d.json {
		return d.text, nil
	}
	out, err := yaml.YAMLToJSONStrict(d.text)
	if err == nil {
		return out, nil
	}
	line := d.line
	msg := err.Error()
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		line = d.line + n - 1
		msg = msg[:m[0]] + "line " + strconv.Itoa(line) + msg[m[1]:]
	}
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	return nil, &locatedError{Line: line, Err: fmt.Errorf("malformed YAML: %s", msg)}
}

// locator finds the line of a field in a document's text.
type locator struct {
	text   []byte
	base   int
	parsed bool
	root   *yamlv3.Node
}

func newLocator(text []byte, base int) *locator { return &locator{text: text, base: base} }

// line returns the file line of a field, of its closest ancestor found, or
// the document's first line.
func (l *locator) line(p fieldPath) int {
	if l == nil {
		return 0
	}
	if !l.parsed {
		l.parsed = true
		var doc yamlv3.Node
		if err := yamlv3.Unmarshal(l.text, &doc); err == nil && doc.Kind == yamlv3.DocumentNode && len(doc.Content) == 1 {
			l.root = doc.Content[0]
		}
	}
	if l.root == nil {
		return l.base
	}
	n := find(l.root, p)
	if n == nil {
		return l.base
	}
	return l.base + n.Line - 1
}

// find walks a YAML node tree along a field path; a name that is not a key
// of the current mapping is looked for one level down (paths from JSON
// decoding errors leave out map keys). It returns the deepest node reached.
func find(n *yamlv3.Node, p fieldPath) *yamlv3.Node {
	for n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if len(p) == 0 {
		return n
	}
	s := p[0]
	switch n.Kind {
	case yamlv3.SequenceNode:
		if s.isIndex && s.index < len(n.Content) {
			if found := find(n.Content[s.index], p[1:]); found != nil {
				return found
			}
			return n.Content[s.index]
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !s.isIndex && n.Content[i].Value == s.name {
				if found := find(n.Content[i+1], p[1:]); found != nil {
					return found
				}
				return n.Content[i]
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if c := n.Content[i+1]; c.Kind == yamlv3.MappingNode {
				for j := 0; j+1 < len(c.Content); j += 2 {
					if !s.isIndex && c.Content[j].Value == s.name {
						return find(c, p)
					}
				}
			}
		}
	}
	return nil
}

// commentLines counts the comment lines of a YAML document's nodes.
func (l *locator) commentLines() int {
	if l == nil {
		return 0
	}
	l.line(nil)
	if l.root == nil {
		return 0
	}
	count := 0
	var walk func(*yamlv3.Node)
	walk = func(n *yamlv3.Node) {
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			if c != "" {
				count += strings.Count(c, "\n") + 1
			}
		}
		for _, ch := range n.Content {
			walk(ch)
		}
	}
	walk(l.root)
	return count
}

// parseFieldPath reads a dotted field path as JSON decoding errors write
// it, e.g. spec.mpiReplicaSpecs.Worker.template.spec.containers[0].foo.
func parseFieldPath(s string) fieldPath {
	var p fieldPath
	for s != "" {
		switch s[0] {
		case '.':
			s = s[1:]
		case '[':
			inner, rest, ok := strings.Cut(s[1:], "]")
			if !ok {
				return append(p, segment{name: s})
			}
			if i, err := strconv.Atoi(inner); err == nil {
				p = append(p, segment{index: i, isIndex: true})
			} else {
				p = append(p, segment{name: inner, isKey: true})
			}
			s = rest
		default:
			end := strings.IndexAny(s, ".[")
			if end < 0 {
				end = len(s)
			}
			p = append(p, segment{name: s[:end]})
			s = s[end:]
		}
	}
	return p
}
