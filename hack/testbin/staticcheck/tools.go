//go:build tools

// Package tools pins staticcheck, which make lint runs beside go vet.
package staticcheck

import _ "honnef.co/go/tools/cmd/staticcheck"
