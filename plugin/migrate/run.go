package migrate

import (
	"context"
	"fmt"
	"io"
)

// migration is one kubectl mpi migrate: where the MPIJobs come from, where the
// TrainJobs go, and the cluster to read from or apply to.
type migration struct {
	// Filenames are files, directories or "-" (In), read in order.
	Filenames []string
	// Recursive descends into the directories' subdirectories.
	Recursive bool
	// FromCluster also converts the MPIJobs Cluster reads.
	FromCluster bool
	Format      outputFormat
	Options     Options
	// OutputDir, when set, gets a file per input instead of Out.
	OutputDir string
	// Apply creates the results through Cluster (with its DryRun).
	Apply bool
	// Strict fails the run on any finding of a field without an exact
	// equivalent.
	Strict  bool
	Cluster *cluster
	In      io.Reader
	// Out gets the converted objects; ErrOut the findings and summary.
	Out, ErrOut io.Writer
}

// Do converts every input, reports each finding, writes or applies the
// results, and returns the summary's verdict.
func (r *migration) Do(ctx context.Context) error {
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
		written, err := writeDir(r.OutputDir, inputs, r.Format)
		// What was written, also when an error stopped the writing.
		if err == nil || written > 0 {
			files := "files"
			if written == 1 {
				files = "file"
			}
			fmt.Fprintf(r.ErrOut, "wrote %d %s to %s\n", written, files, r.OutputDir)
		}
		if err != nil {
			return err
		}
	case !r.Apply:
		if err := write(r.Out, all, r.Format); err != nil {
			return err
		}
	}
	applyFailures := 0
	if r.Apply {
		applyFailures = r.Cluster.Apply(ctx, all)
	}
	return summarize(r.ErrOut, all, applyFailures, r.Strict)
}

func (r *migration) read(ctx context.Context) ([]inputFile, error) {
	var inputs []inputFile
	for _, f := range r.Filenames {
		if f == "-" {
			in, err := readStdin(r.In, r.Format, r.Options)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, in)
			continue
		}
		in, err := readPath(f, r.Recursive, r.Format, r.Options)
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
