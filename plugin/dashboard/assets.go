package dashboard

import (
	"embed"
	"io/fs"
)

// built holds the web assets make web builds (web/dist); a tree where they
// were not built holds only their README, and the server says so.
//
//go:embed all:web/dist
var built embed.FS

func assets() fs.FS {
	sub, err := fs.Sub(built, "web/dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}
