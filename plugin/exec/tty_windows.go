//go:build windows

package exec

import "os"

// resizes: Windows consoles send no resize signal; the first size stays.
func resizes() (<-chan os.Signal, func()) {
	return make(chan os.Signal), func() {}
}
