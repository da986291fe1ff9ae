package wire_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// debianPackages are what the wire test runs: the real sshd, both MPI
// implementations Debian ships with their compiler wrappers, and the C
// compiler those wrappers call. Intel MPI is missing on purpose: it has no
// Debian package and its installer has to be downloaded from Intel, which
// this machine cannot do, so Intel MPI's environment is only checked by the
// operator's unit and integration tests.
var debianPackages = []string{"openssh-server", "openmpi-bin", "libopenmpi-dev", "mpich", "libmpich-dev", "gcc"}

// ensurePackages installs the packages that are missing, once.
func ensurePackages(ctx context.Context) error {
	var missing []string
	for _, p := range debianPackages {
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
