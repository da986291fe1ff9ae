package olm

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// background is a process this suite started; it is stopped by its PID.
type background struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start runs a process in its own process group with its output in
// <workDir>/<name>.log, and stops it when the spec's container ends.
func start(name string, env []string, argv ...string) *background {
	GinkgoHelper()
	log := filepath.Join(workDir, name+".log")
	f, err := os.Create(log)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(cmd.Start()).To(Succeed(), "starting %s", name)
	f.Close()
	b := &background{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(b.done) }()
	GinkgoWriter.Printf("started %s, pid %d, log %s\n", name, cmd.Process.Pid, log)
	DeferCleanup(b.stop)
	return b
}

func (b *background) running() bool {
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 10 s.
func (b *background) stop() {
	if !b.running() {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
	GinkgoWriter.Printf("stopped %s, pid %d\n", b.name, b.cmd.Process.Pid)
}

// logLines returns the lines of the process's log that contain any of the
// given substrings, case-insensitively.
func (b *background) logLines(subs ...string) []string {
	GinkgoHelper()
	f, err := os.Open(b.log)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.ToLower(sc.Text())
		for _, s := range subs {
			if strings.Contains(line, strings.ToLower(s)) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listeners returns the local addresses a process listens on (TCP, v4 and
// v6), read from /proc: its socket inodes, matched against the kernel's
// tables of listening sockets.
func listeners(pid int) ([]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// local_address, st (0A is LISTEN), inode.
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			addr, err := procAddr(f[1])
			if err != nil {
				return nil, err
			}
			out = append(out, addr)
		}
	}
	return out, nil
}

// procAddr decodes /proc/net/tcp's hex "address:port" (the address in the
// kernel's byte order, 32-bit words little-endian).
func procAddr(s string) (string, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok || len(host)%8 != 0 {
		return "", errors.New("bad /proc/net/tcp address " + s)
	}
	ip := make(net.IP, 0, len(host)/2)
	for w := 0; w < len(host); w += 8 {
		word, err := strconv.ParseUint(host[w:w+8], 16, 32)
		if err != nil {
			return "", err
		}
		ip = append(ip, byte(word), byte(word>>8), byte(word>>16), byte(word>>24))
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(p, 10)), nil
}

// loopbackOnly fails unless every address is on a loopback IP.
func loopbackOnly(b *background) {
	GinkgoHelper()
	addrs, err := listeners(b.cmd.Process.Pid)
	Expect(err).NotTo(HaveOccurred())
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		Expect(err).NotTo(HaveOccurred())
		Expect(net.ParseIP(host).IsLoopback()).To(BeTrue(), "%s listens on %s, beyond loopback", b.name, a)
	}
	GinkgoWriter.Printf("%s listens on %v\n", b.name, addrs)
}
