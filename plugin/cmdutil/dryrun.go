package cmdutil

// Modes of --dry-run, kubectl's words: run and migrate take them.
const (
	DryRunNone   = "none"
	DryRunClient = "client"
	DryRunServer = "server"
)
