// Package launchagent is a small stand-in for OpenSSH inside a job's pods:
// the remote-launch path MPI launchers use to start their daemons on other
// hosts (Open MPI's orted, PRRTE's prted, Hydra's proxies). Server speaks
// the SSH protocol for exactly what launchers need, one command per session
// run as the agent's own user, authenticated by the job's client key alone;
// Client is the "ssh" a launcher runs, reading the ssh command lines they
// build and trusting only the job's host key.
//
// Unlike sshd it needs no root, no passwd entry and no configuration files,
// passes its own environment on to commands (sshd replaces it), and kills a
// command's whole process group when its client goes away, so that a job
// killed on the launcher leaves no daemon behind on the workers.
package launchagent
