package migrate

import (
	"context"
	"fmt"
	"io"
)

// Run is one kubectl mpi migrate: where the MPIJobs come from, where the
// TrainJobs go, and the cluster to read from or apply to.
type Run struct {
	// Filenames are files, directories or "-" (In), read in order.
	Filenames []string
	// Recursive descends into the directories' subdirectories.
	Recursive bool
	// FromCluster also converts the MPIJobs Cluster reads.
	FromCluster bool
	Format      Format
	Options     Options
	// OutputDir, when set, gets a file per input instead of Out.
	OutputDir string
	// Apply creates the results through Cluster (with its DryRun).
	Apply bool
	// Strict fails the run on any finding of a field without an exact
	// equivalent.
	Strict  bool
	Cluster *Cluster
	In      io.Reader
	// Out gets the converted objects; ErrOut the findings and summary.
	Out, ErrOut io.Writer
}

// Do converts every input, reports each finding, writes or applies the
// results, and returns the summary's verdict.
func (r *Run) Do(ctx context.Context) error {
	inputs, err := r.read(ctx)
	if err != nil {
		return err
	}
	var all []*Item
	for _, in := range inputs {
		all = append(all, in.Items...)
	}
	for _, it := range all {
		for _, f := range it.Findings {
			fmt.Fprintln(r.ErrOut, it.FormatFinding(f))
		}
	}
	switch {
	case r.OutputDir != "":
		written, err := WriteDir(r.OutputDir, inputs, r.Format)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.ErrOut, "wrote %d files to %s\n", written, r.OutputDir)
	case !r.Apply:
		if err := Write(r.Out, all, r.Format); err != nil {
			return err
		}
	}
	applyFailures := 0
	if r.Apply {
		applyFailures = r.Cluster.Apply(ctx, all)
	}
	return Summarize(r.ErrOut, all, applyFailures, r.Strict)
}

func (r *Run) read(ctx context.Context) ([]Input, error) {
	var inputs []Input
	for _, f := range r.Filenames {
		if f == "-" {
			in, err := ReadStdin(r.In, r.Format, r.Options)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, in)
			continue
		}
		in, err := ReadPath(f, r.Recursive, r.Format, r.Options)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in...)
	}
	if r.FromCluster {
		in, err := r.Cluster.Read(ctx, r.Format, r.Options)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in...)
	}
	return inputs, nil
}
