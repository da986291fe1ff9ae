// Package browser starts the headless Chromium that the dashboard's tests
// and benchmark drive: Debian's package (install.sh), talking to loopback
// only, with every feature that would reach the internet by itself off.
package browser

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/chromedp/chromedp"

	"github.com/torus-mpi/torus/hack/repo"
)

// Path is Chromium's executable, installed first where it is missing.
func Path() (string, error) {
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(root, "test", "browser", "install.sh")).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("installing Chromium: %w: %s", err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "", fmt.Errorf("installing Chromium: install.sh named no browser")
	}
	return fields[len(fields)-1], nil
}

// Start starts Chromium with its profile in userDataDir and returns the
// context its actions run in, after the browser has started; cancel stops
// it.
func Start(ctx context.Context, userDataDir string, extra ...chromedp.ExecAllocatorOption) (context.Context, context.CancelFunc, error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(userDataDir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	cancel := func() { cancelCtx(); cancelAlloc() }
	// The first action starts the browser, and so has no deadline.
	if err := chromedp.Do(bctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("starting Chromium (%s): %w", path, err)
	}
	return bctx, cancel, nil
}
