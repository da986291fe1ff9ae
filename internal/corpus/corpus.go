// Package corpus finds the project's shared test data, shared/corpus/, which
// lives beside the repository (in CI too) and is never copied into it.
package corpus

import (
	"os"
	"path/filepath"
)

// Dir is shared/corpus/<name>. TORUS_CORPUS overrides the corpus root.
func Dir(name string) string {
	if d := os.Getenv("TORUS_CORPUS"); d != "" {
		return filepath.Join(d, name)
	}
	beside := filepath.Join(filepath.Dir(repoRoot()), "shared", "corpus", name)
	if _, err := os.Stat(beside); err != nil {
		// A worktree elsewhere on a developer machine.
		if _, err := os.Stat("/work/shared/corpus/" + name); err == nil {
			return "/work/shared/corpus/" + name
		}
	}
	return beside
}

func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}
