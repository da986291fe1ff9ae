package mpi

import "path"

// sshdBinary is where sshd lives in the images Torus's samples use.
const sshdBinary = "/usr/sbin/sshd"

// SSHDConfigPath is the sshd configuration Torus writes into a pod's SSH
// directory (mlPolicy.mpi.sshAuthMountPath); workers' sshd must read it
// with -f to use the job's host key, authorized keys and port.
func SSHDConfigPath(sshPath string) string {
	return path.Join(sshPath, SSHDaemonConfig)
}

// SSHDCommand is a worker's sshd command line: in the foreground, logging
// to stderr, with the job's configuration.
func SSHDCommand(sshPath string) []string {
	return []string{sshdBinary, "-De", "-f", SSHDConfigPath(sshPath)}
}
