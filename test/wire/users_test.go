package wire_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// podUserName and podHome are the account the samples' image
// (mpioperator/mpi-pi) has for uid 1000, whose home holds the SSH directory
// the runtimes name (sshAuthMountPath /home/mpiuser/.ssh).
const (
	podUserName = "mpiuser"
	podHome     = "/home/mpiuser"
)

// podUser is whom a container runs as.
type podUser struct {
	uid, gid int64
}

// userDatabase is the /etc/passwd and /etc/group every pod sees, as an image
// brings its own: the machine's entries without any that clash with the
// pod's account, plus that account. ssh and sshd need the account to exist
// (ssh looks up who runs it, sshd whom it lets in), but this machine may
// already give the uid to someone else (here uid 1000 is another account),
// and the test must not change the machine's users: `ip netns exec` mounts
// these files over /etc/passwd and /etc/group in the pods only.
func userDatabase(u podUser) (passwd, group []byte, err error) {
	passwd, err = withoutClashes("/etc/passwd", u.uid)
	if err != nil {
		return nil, nil, err
	}
	passwd = fmt.Appendf(passwd, "%s:x:%d:%d:MPI pods of the wire test:%s:/bin/sh\n", podUserName, u.uid, u.gid, podHome)
	group, err = withoutClashes("/etc/group", u.gid)
	if err != nil {
		return nil, nil, err
	}
	group = fmt.Appendf(group, "%s:x:%d:\n", podUserName, u.gid)
	return passwd, group, nil
}

// withoutClashes reads a passwd or group file and drops the entries named
// podUserName or numbered id.
func withoutClashes(path string, id int64) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the machine's %s: %w", path, err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 3 && (fields[0] == podUserName || fields[2] == strconv.FormatInt(id, 10)) {
			continue
		}
		out.WriteString(sc.Text() + "\n")
	}
	return out.Bytes(), sc.Err()
}
