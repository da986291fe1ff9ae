package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPIDRecord: a PID file names its process by PID and start time, so
// that a PID the kernel has given another process reads as gone.
func TestPIDRecord(t *testing.T) {
	dir := t.TempDir()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	start, err := StartTime(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		file      string
		wantPID   int
		wantAlive bool
	}{
		{name: "the running process, as WritePIDFile records it", wantPID: sleeper.Process.Pid, wantAlive: true},
		{name: "its PID alone, as a file another tool wrote", file: strconv.Itoa(sleeper.Process.Pid) + "\n", wantPID: sleeper.Process.Pid, wantAlive: true},
		{name: "its PID, another start: the PID reused, not the process recorded", file: strconv.Itoa(sleeper.Process.Pid) + " " + strconv.FormatUint(start+1, 10) + "\n", wantPID: sleeper.Process.Pid},
		{name: "a process that exited", file: strconv.Itoa(exited.Process.Pid) + " " + strconv.FormatUint(start, 10) + "\n", wantPID: exited.Process.Pid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "c.pid")
			if tc.file == "" {
				if err := WritePIDFile(path, sleeper.Process.Pid); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := ReadPIDFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if r.PID != tc.wantPID || r.Alive() != tc.wantAlive {
				t.Errorf("read %+v, alive %t; want pid %d, alive %t", r, r.Alive(), tc.wantPID, tc.wantAlive)
			}
		})
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.pid"), []byte("twelve\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPIDFile(filepath.Join(dir, "bad.pid")); err == nil {
		t.Error("a PID file without a number read as a record")
	}
}
