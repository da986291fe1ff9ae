package main

import (
	"fmt"
	"sort"
	"strings"
)

// counts are tallies by name: a controller's requests by HTTP method, the
// API server's writes by resource and verb.
type counts map[string]float64

// minus is the tallies since before.
func (c counts) minus(before counts) counts {
	d := counts{}
	for k, v := range c {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func (c counts) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// String lists the tallies, most first: "PATCH 2098, POST 1002".
func (c counts) String() string { return c.format("%s %.0f") }

// tenths lists the tallies, most first, to a tenth: "kwok 3.2, etcd 0.4".
func (c counts) tenths() string { return c.format("%s %.1f") }

func (c counts) format(item string) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(item, k, c[k])
	}
	return strings.Join(parts, ", ")
}
