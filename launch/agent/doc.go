// Package agent is a small stand-in for OpenSSH inside a job's pods:
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
// killed on the launcher leaves no daemon behind on the workers. When its
// pod is stopped, Shutdown passes SIGTERM on to every command's process
// group at once and waits for them, so that ranks have the pod's grace
// period to write a checkpoint; torus-launch then exits 0, or
// cmdline.ExitWorldLost when the stop cut commands short (see lost.go),
// and as a container's first process it runs under an init of its own
// that reaps the orphans the ranks leave. Client asks its host every
// AliveInterval whether it is still there while a command runs, and gives
// a silent one up as lost, as it does one whose connection breaks.
//
// The agent listens on every interface of its pod, so any pod of the
// cluster can connect to it, and it holds to sshd's bounds on what a peer
// that has not authenticated may take. At most MaxStartups connections
// (DefaultMaxStartups) may be in their handshake at once, and at most
// PerSourceMaxStartups of them (DefaultPerSourceMaxStartups) from one
// address; a connection beyond either is closed as it is accepted, before
// a byte is read. A handshake not done within LoginGraceTime
// (DefaultLoginGraceTime) is closed. A flood of connections thus costs
// the agent a small fixed amount of memory however many it opens. An
// authenticated connection holds the job's key: it counts against no
// bound and has no deadline, so a rank's session lasts as long as the
// rank, and commands already running are untouched by a flood. The price,
// which sshd pays too (its MaxStartups drops connections at random past
// 10), is that while a flood from enough sources holds every slot a
// launcher's new connection is refused as well; the bound per source keeps
// one pod from holding them all.
package agent
