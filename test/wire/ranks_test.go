package wire_test

import (
	"fmt"
	"regexp"
	"strconv"
)

// rankReport is what one rank of testdata/ranks.c says about itself.
type rankReport struct {
	rank, size int
	host       string
	sum        int64
	vector     string
	library    string
}

var rankLine = regexp.MustCompile(`(?m)^torus-wire rank=(\d+) size=(\d+) host=(\S+) sum=(-?\d+) vector=(\w+) library=(.*?)\r?$`)

// parseRanks reads every rank's line from the launcher's output.
func parseRanks(out string) (map[int]rankReport, error) {
	ranks := map[int]rankReport{}
	for _, m := range rankLine.FindAllStringSubmatch(out, -1) {
		r := rankReport{host: m[3], vector: m[5], library: m[6]}
		var err error
		if r.rank, err = strconv.Atoi(m[1]); err != nil {
			return nil, fmt.Errorf("rank in %q: %w", m[0], err)
		}
		if r.size, err = strconv.Atoi(m[2]); err != nil {
			return nil, fmt.Errorf("size in %q: %w", m[0], err)
		}
		if r.sum, err = strconv.ParseInt(m[4], 10, 64); err != nil {
			return nil, fmt.Errorf("sum in %q: %w", m[0], err)
		}
		if _, dup := ranks[r.rank]; dup {
			return nil, fmt.Errorf("rank %d reported twice", r.rank)
		}
		ranks[r.rank] = r
	}
	return ranks, nil
}
