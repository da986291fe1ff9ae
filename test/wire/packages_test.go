package wire_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// debianPackages reads packages.txt: what the wire test runs, and why.
func debianPackages() ([]string, error) {
	data, err := os.ReadFile("packages.txt")
	if err != nil {
		return nil, fmt.Errorf("reading the wire test's package list: %w", err)
	}
	var pkgs []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			pkgs = append(pkgs, line)
		}
	}
	return pkgs, nil
}

// ensurePackages installs the packages that are missing, once.
func ensurePackages(ctx context.Context) error {
	pkgs, err := debianPackages()
	if err != nil {
		return err
	}
	var missing []string
	for _, p := range pkgs {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Abbrev}", p).Output()
		if err != nil || !strings.HasPrefix(string(out), "ii") {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("packages %v are missing and there is no apt-get to install them (the wire test expects Debian): %w", missing, err)
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	// Other people's apt runs may hold the locks for a while: wait for them
	// rather than fail; a mirror's dropped connection is tried again.
	apt := []string{"apt-get", "-o", "DPkg::Lock::Timeout=300", "-o", "Acquire::Retries=3"}
	if _, err := runFor(ctx, 5*time.Minute, env, append(apt, "update")...); err != nil {
		return fmt.Errorf("refreshing the package lists to install %v: %w", missing, err)
	}
	args := append(append(apt, "install", "-y", "--no-install-recommends"), missing...)
	if _, err := runFor(ctx, 10*time.Minute, env, args...); err != nil {
		return fmt.Errorf("installing %v: %w", missing, err)
	}
	return nil
}
