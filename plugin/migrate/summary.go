package migrate

import (
	"errors"
	"fmt"
	"io"
)

// summarize prints the tally of a migration to w and turns its failures
// (and, with strict, its warnings) into an error: documents that could not
// be converted, and applyFailures objects that could not be created.
func summarize(w io.Writer, items []*Item, applyFailures int, strict bool) error {
	var converted, generated, reused, passed, failed int
	for _, it := range items {
		switch {
		case it.Converted():
			converted++
			if it.Result.Runtime != nil {
				generated++
			} else {
				reused++
			}
		case it.Failed():
			failed++
		case !it.Blank:
			passed++
		}
	}
	warnings := countItems(items, LevelWarning)
	fmt.Fprintf(w, "migrate: %d MPIJobs converted (%d runtimes generated, %d shipped runtimes used), %d documents passed through, %d failed; %d warnings, %d changes, %d notes\n",
		converted, generated, reused, passed, failed, warnings, countItems(items, LevelChange), countItems(items, LevelNote))
	var errs []error
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%d documents could not be converted (errors above)", failed))
	}
	if applyFailures > 0 {
		errs = append(errs, fmt.Errorf("%d objects could not be created (errors above)", applyFailures))
	}
	if strict && warnings > 0 {
		errs = append(errs, fmt.Errorf("--strict: %d warnings, fields without an exact equivalent (listed above)", warnings))
	}
	return errors.Join(errs...)
}
