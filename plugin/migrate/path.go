package migrate

import (
	"strconv"
	"strings"
)

// fieldPath names a field of a manifest, segment by segment, so that a
// finding can be located in the YAML it came from. Segments are map keys
// or, when isIndex, sequence positions.
type fieldPath []segment

type segment struct {
	name    string
	index   int
	isIndex bool
	// isKey marks a map key (rendered as [key]), e.g. a replica type.
	isKey bool
}

func newPath(names ...string) fieldPath {
	p := make(fieldPath, 0, len(names)+4)
	for _, n := range names {
		p = append(p, segment{name: n})
	}
	return p
}

// Child appends field names.
func (p fieldPath) Child(names ...string) fieldPath {
	q := make(fieldPath, len(p), len(p)+len(names))
	copy(q, p)
	for _, n := range names {
		q = append(q, segment{name: n})
	}
	return q
}

// Index appends a sequence position.
func (p fieldPath) Index(i int) fieldPath {
	q := make(fieldPath, len(p), len(p)+1)
	copy(q, p)
	return append(q, segment{index: i, isIndex: true})
}

// Key appends a map key, rendered in brackets.
func (p fieldPath) Key(k string) fieldPath {
	q := make(fieldPath, len(p), len(p)+1)
	copy(q, p)
	return append(q, segment{name: k, isKey: true})
}

func (p fieldPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.isIndex:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case s.isKey:
			b.WriteString("[" + s.name + "]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		}
	}
	return b.String()
}
