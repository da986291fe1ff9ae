// Package testbin tests build.sh, which builds the pinned binaries the
// tests run; the helper modules beside it pin their versions.
package testbin

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitsForABusyHolder runs build.sh while another build.sh holds the
// lock of the binary it needs and keeps starting short-lived processes, as
// a go build does with its compilers. The waiter raises the holder's
// priority (boost), reading the processes under it while they come and go;
// it must then wait for the lock and find the binary up to date, whatever
// exited meanwhile.
func TestWaitsForABusyHolder(t *testing.T) {
	// build.sh needs them all: make test cannot build without them either.
	for _, tool := range []string{"flock", "pgrep", "renice", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("build.sh needs %s: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	testbin := t.TempDir()
	for _, d := range []string{"bin", "stamps"} {
		if err := os.Mkdir(filepath.Join(testbin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// etcd, built already at the version its helper module pins: once the
	// lock is free, build.sh has nothing to do but say so.
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	list.Dir = filepath.Join(here, "etcd")
	list.Env = append(os.Environ(), "GOWORK=off")
	version, err := list.Output()
	if err != nil {
		t.Fatalf("the pinned etcd version: %v", err)
	}
	stamp := strings.TrimSpace(string(version)) + " (etcd)\n"
	if err := os.WriteFile(filepath.Join(testbin, "stamps", "etcd"), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(testbin, "bin", "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The holder: named build.sh, as boost checks; four loops under it
	// start processes of 20 ms each, shorter than the waiter's walk of the
	// process tree (a pgrep per process), so some it finds are gone when
	// it reads their threads.
	release := filepath.Join(testbin, "release")
	holderScript := filepath.Join(t.TempDir(), "build.sh")
	script := `set -eu
exec 9>"$TESTBIN/stamps/.etcd.lock"
flock 9
echo $$ >"$TESTBIN/stamps/.etcd.holder"
for i in 1 2 3 4; do
  ( while [ ! -e "$RELEASE" ]; do sleep 0.02; done ) &
done
echo locked
wait
`
	if err := os.WriteFile(holderScript, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	holder := exec.CommandContext(ctx, "bash", holderScript)
	holder.Env = append(os.Environ(), "TESTBIN="+testbin, "RELEASE="+release)
	holderOut, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = os.WriteFile(release, nil, 0o644)
		_ = holder.Wait()
	}()
	if line, err := bufio.NewReader(holderOut).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the holder did not take the lock: %q, %v", line, err)
	}

	build := exec.CommandContext(ctx, filepath.Join(here, "build.sh"), "etcd")
	build.Env = append(os.Environ(), "TESTBIN="+testbin)
	stderr, err := build.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	build.Stdout = &stdout
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	// The holder lets go once the waiter has boosted it and said so; a
	// waiter that stops before that closes its stderr.
	waiting := false
	var said strings.Builder
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), "waiting for the build of etcd") {
			waiting = true
			break
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
	}
	err = build.Wait()
	if err != nil || !waiting {
		t.Fatalf("build.sh etcd beside a busy holder: %v (waited: %v)\nstdout:\n%s\nstderr:\n%s", err, waiting, stdout.String(), said.String())
	}
	if !strings.Contains(stdout.String(), "testbin: etcd "+strings.TrimSpace(stamp)+" up to date") {
		t.Errorf("build.sh etcd after the holder let go said:\n%s\nwant etcd up to date", stdout.String())
	}
}
