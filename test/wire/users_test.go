package wire_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// imageUser is the account the pods' image has, as the images built here
// (test/localcluster/images) and mpi-operator's have mpiuser: uid and gid 1000, whose
// home holds the SSH directory the runtimes name (sshAuthMountPath
// /home/mpiuser/.ssh). A pod runs as it unless its security context names
// another UID, as OpenShift's SCCs do with one from the namespace's range,
// which the image does not know.
var imageUser = podUser{uid: 1000, gid: 1000}

const (
	imageUserName = "mpiuser"
	imageHome     = "/home/mpiuser"
)

// podUser is whom a container runs as.
type podUser struct {
	uid, gid int64
}

// userDatabase is the /etc/passwd and /etc/group of the pods' image: the
// machine's entries without any that clash with the image's account, plus
// that account. The machine may already give uid 1000 to someone else
// (here it does), and the test must not change the machine's users:
// `ip netns exec` mounts these files over /etc/passwd and /etc/group in the
// pods only. A pod's UID other than the image's has no entry, as on
// OpenShift; the operator's init container must give ssh and sshd one.
func userDatabase() (passwd, group []byte, err error) {
	passwd, err = withoutClashes("/etc/passwd", imageUser.uid)
	if err != nil {
		return nil, nil, err
	}
	passwd = fmt.Appendf(passwd, "%s:x:%d:%d:MPI pods of the wire test:%s:/bin/sh\n", imageUserName, imageUser.uid, imageUser.gid, imageHome)
	group, err = withoutClashes("/etc/group", imageUser.gid)
	if err != nil {
		return nil, nil, err
	}
	group = fmt.Appendf(group, "%s:x:%d:\n", imageUserName, imageUser.gid)
	return passwd, group, nil
}

// withoutClashes reads a passwd or group file and drops the entries named
// imageUserName or numbered id.
func withoutClashes(path string, id int64) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the machine's %s: %w", path, err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 3 && (fields[0] == imageUserName || fields[2] == strconv.FormatInt(id, 10)) {
			continue
		}
		out.WriteString(sc.Text() + "\n")
	}
	return out.Bytes(), sc.Err()
}
