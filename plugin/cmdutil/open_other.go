//go:build !unix

package cmdutil

// Without O_NOFOLLOW and O_NONBLOCK the checks on the path (Lstat) and on
// the open file (Stat) refuse what is not a regular file.
const (
	openNoFollow = 0
	openNonBlock = 0
)
