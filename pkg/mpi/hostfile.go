package mpi

import (
	"strconv"
	"strings"
)

// Hostfile renders the hostfile of a placement in the implementation's
// format (Open MPI "host slots=N", Hydra "host:N").
func Hostfile(impl Implementation, p Placement) string {
	var b strings.Builder
	// Host names are short; 48 bytes a line avoids regrowth for typical names.
	b.Grow(len(p.Hosts) * 48)
	slots := impl.of().slotsSeparator + strconv.Itoa(int(p.SlotsPerHost))
	for _, h := range p.Hosts {
		b.WriteString(h.Address)
		b.WriteString(slots)
		b.WriteByte('\n')
	}
	return b.String()
}
