package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	hackbrowser "github.com/torus-mpi/torus/test/browser"
)

// Browser is a headless Chromium, from the machine's Debian packages
// (test/browser/install.sh), driven over its DevTools protocol. It talks
// to loopback only: the flags turn off everything Chromium would
// fetch from the internet by itself.
type Browser struct {
	ctx       context.Context
	artifacts string
}

// NewBrowser starts Chromium for the running spec; it is stopped at the
// spec's (or the container's) cleanup. Screenshots go to artifacts.
func NewBrowser(artifacts string) *Browser {
	ginkgo.GinkgoHelper()
	gomega.Expect(os.MkdirAll(artifacts, 0o755)).To(gomega.Succeed())
	ctx, cancel, err := hackbrowser.Start(context.Background(), ginkgo.GinkgoT().TempDir(), chromedp.WindowSize(1400, 1000))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(cancel)
	return &Browser{ctx: ctx, artifacts: artifacts}
}

// Do performs steps, bounded so that a page that never shows what is
// waited for fails the spec instead of hanging it.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// Eval evaluates a script on the page and decodes its value.
func Eval[T any](b *Browser, script string, opts ...chromedp.EvaluateOption) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](script, opts...))
}

// Open navigates to url.
func (b *Browser) Open(url string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(b.Do(chromedp.Navigate(url))).To(gomega.Succeed())
}

// Text is the page's visible text.
func (b *Browser) Text() string {
	s, err := Eval[string](b, `document.body.innerText`)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// Click clicks the element a CSS selector names, once it is visible.
func (b *Browser) Click(selector string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(b.Do(chromedp.WaitVisible(chromedp.CSS(selector)), chromedp.Click(chromedp.CSS(selector)))).To(gomega.Succeed(), "clicking %s", selector)
}

// Fill sets a form control's value as a user's typing would, so the
// page's own handlers see it: inputs, text areas and selects.
func (b *Browser) Fill(selector, value string) {
	ginkgo.GinkgoHelper()
	sel, _ := json.Marshal(selector)
	val, _ := json.Marshal(value)
	js := fmt.Sprintf(`(() => {
  const el = document.querySelector(%s);
  if (!el) return false;
  const proto = Object.getPrototypeOf(el);
  Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, %s);
  el.dispatchEvent(new Event(el.tagName === 'SELECT' ? 'change' : 'input', { bubbles: true }));
  return true;
})()`, sel, val)
	gomega.Expect(b.Do(chromedp.WaitVisible(chromedp.CSS(selector)))).To(gomega.Succeed(), "waiting for %s", selector)
	found, err := Eval[bool](b, js)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(found).To(gomega.BeTrue(), "no %s on the page", selector)
}

// Screenshot saves the whole page as <artifacts>/<name>.png.
func (b *Browser) Screenshot(name string) string {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	path := filepath.Join(b.artifacts, name+".png")
	gomega.Expect(os.WriteFile(path, png, 0o644)).To(gomega.Succeed())
	ginkgo.AddReportEntry("screenshot "+name, path)
	return path
}

// AxeViolation is one rule axe-core found broken on a page.
type AxeViolation struct {
	ID    string `json:"id"`
	Help  string `json:"help"`
	Nodes []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v AxeViolation) String() string {
	var targets []string
	for _, n := range v.Nodes {
		targets = append(targets, fmt.Sprint(n.Target)+" "+n.HTML)
	}
	return fmt.Sprintf("%s (%s): %s", v.ID, v.Help, strings.Join(targets, "; "))
}

// settle waits for the page's finite animations and transitions to end: a
// section fading in has, halfway, a contrast no reader sees at rest.
const settle = `Promise.all(document.getAnimations()
  .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
  .map(a => a.finished.catch(() => null))).then(() => true)`

// Accessibility runs axe-core (the npm package the dashboard's lockfile
// pins) on the page at rest, against WCAG 2.1 A and AA.
func (b *Browser) Accessibility() []AxeViolation {
	ginkgo.GinkgoHelper()
	if _, err := Eval[bool](b, settle, chromedp.EvalAwaitPromise); err != nil {
		ginkgo.Fail(fmt.Sprintf("waiting for the page's animations: %v", err))
	}
	axe, err := os.ReadFile(filepath.Join(RepoRoot(), "plugin", "dashboard", "web", "node_modules", "axe-core", "axe.min.js"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "axe-core is missing: run make web")
	if _, err := Eval[any](b, string(axe)); err != nil {
		ginkgo.Fail(fmt.Sprintf("loading axe-core: %v", err))
	}
	run := `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }).then(r => JSON.stringify(r.violations))`
	out, err := Eval[string](b, run, chromedp.EvalAwaitPromise)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var violations []AxeViolation
	gomega.Expect(json.Unmarshal([]byte(out), &violations)).To(gomega.Succeed())
	return violations
}

// ClickText clicks the first button, link or tab whose text is text, as a
// user who reads the page would.
func (b *Browser) ClickText(text string) {
	ginkgo.GinkgoHelper()
	t, _ := json.Marshal(text)
	js := fmt.Sprintf(`(() => {
  const el = [...document.querySelectorAll('button, a, [role=tab], [role=button]')].find(e => e.innerText.trim() === %s);
  if (!el) return false;
  el.click();
  return true;
})()`, t)
	gomega.Eventually(func() (bool, error) { return Eval[bool](b, js) }, 30*time.Second, 200*time.Millisecond).Should(gomega.BeTrue(), "nothing to click reads %q", text)
}

// Value is a form control's value.
func (b *Browser) Value(selector string) string {
	sel, _ := json.Marshal(selector)
	v, err := Eval[string](b, fmt.Sprintf(`(document.querySelector(%s) || {}).value || ''`, sel))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return v
}

// Count is how many elements a CSS selector matches.
func (b *Browser) Count(selector string) int {
	sel, _ := json.Marshal(selector)
	n, err := Eval[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, sel))
	if err != nil {
		return -1
	}
	return n
}

// Type sends keys to the focused element as key presses (kb's names for
// Tab, Enter and the like are runes: "\t", "\r").
func (b *Browser) Type(keys string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(b.Do(chromedp.KeyEvent(keys))).To(gomega.Succeed())
}

// SelectAll selects the focused field's text, so typing replaces it.
func (b *Browser) SelectAll() {
	ginkgo.GinkgoHelper()
	gomega.Expect(b.Do(chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)))).To(gomega.Succeed())
}

// TabTo presses Tab until the focused element matches a CSS selector, as a
// keyboard user moves through a page; it fails after 60 presses.
func (b *Browser) TabTo(selector string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(b.Do(chromedp.WaitVisible(chromedp.CSS(selector)))).To(gomega.Succeed(), "waiting for %s", selector)
	sel, _ := json.Marshal(selector)
	for range 60 {
		if ok, err := Eval[bool](b, fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%s)`, sel)); err == nil && ok {
			return
		}
		b.Type("\t")
	}
	ginkgo.Fail(fmt.Sprintf("60 presses of Tab never reached %s", selector))
}

// StartDashboard runs plugin's dashboard with a kubeconfig (and any other
// arguments), and returns the URL it printed; it is killed by its PID when
// the spec or container that started it ends.
func StartDashboard(plugin, kubeconfig string, args ...string) string {
	ginkgo.GinkgoHelper()
	cmd := exec.Command(plugin, append(append([]string{"--kubeconfig", kubeconfig}, args...), "dashboard", "--open=false")...)
	out, err := cmd.StdoutPipe()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	cmd.Stderr = ginkgo.GinkgoWriter
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	gomega.Expect(cmd.Start()).To(gomega.Succeed())
	ginkgo.DeferCleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			fmt.Fprintln(ginkgo.GinkgoWriter, s.Text())
			if u := dashboardURL.FindString(s.Text()); u != "" {
				found <- u
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		ginkgo.Fail("kubectl mpi dashboard printed no URL in 30 s")
	}
	return ""
}

var dashboardURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)

// DashboardBase is the dashboard's address without its token.
func DashboardBase(url string) string { return url[:strings.Index(url, "/?token=")] }

// ExpectAccessible fails with every rule axe-core finds broken on the page.
func ExpectAccessible(b *Browser, page string) {
	ginkgo.GinkgoHelper()
	v := b.Accessibility()
	var lines []string
	for _, x := range v {
		lines = append(lines, x.String())
	}
	if len(lines) > 0 {
		ginkgo.Fail(fmt.Sprintf("WCAG 2.1 AA violations on the %s page:\n%s", page, strings.Join(lines, "\n")))
	}
}
