// Package webtest drives the reviewer pages in a real browser for tests:
// Debian's chromium through chromedp, one browser per test, one isolated
// browser context (its own cookies) per tab, and a hook in every document
// that records any script the page did not mean to run.
//
// It is imported only by tests. Under CI=true a missing chromium fails the
// test; elsewhere the test is skipped with the command that installs it.
package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// Browser starts a headless chromium for the test and stops it when the
// test ends; extra options are added to the usual ones. Open tabs with
// Tab.
func Browser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is missing at %s (CI=true): apt-get install -y chromium", ChromiumPath)
		}
		t.Skipf("chromium is not installed at %s; install it with: sudo apt-get install -y chromium (or run make test-deps as root)", ChromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ChromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900))
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Start the browser now, in the first (blank) tab, so that tabs share it.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	return bctx
}

// hook runs before any script of every document the tab opens. It records
// in window.__airlockHits every execution a hostile payload could cause
// (the payloads call window.__xss; alert, confirm, prompt and print are
// replaced), every Content Security Policy violation, which is what an
// injected inline script or handler would cause even when it is blocked,
// and every uncaught error (of the page's own script too).
const hook = `(function () {
  if (window.__airlockHits) return;
  const hits = [];
  Object.defineProperty(window, '__airlockHits', { value: hits });
  window.__xss = function (tag) { hits.push('exec: ' + tag); };
  ['alert', 'confirm', 'prompt', 'print'].forEach(function (f) {
    window[f] = function () { hits.push('exec: ' + f + '(' + Array.from(arguments).join(',') + ')'); };
  });
  window.addEventListener('error', function (e) { hits.push('error: ' + e.message); }, true);
  window.addEventListener('unhandledrejection', function (e) { hits.push('rejection: ' + e.reason); });
  document.addEventListener('securitypolicyviolation', function (e) {
    hits.push('csp: ' + e.violatedDirective + ' blocked ' + e.blockedURI + ' ' + (e.sample || ''));
  }, true);
})();`

// Tab opens a tab in a fresh browser context (no cookies shared with other
// tabs) with the execution hook installed. It closes with the test.
func Tab(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: hook}); err != nil {
		t.Fatalf("installing the execution hook: %v", err)
	}
	return ctx
}

// Hits returns what the hook recorded in the current document: executions
// and CSP violations. A page that shows hostile text honestly has none.
func Hits(ctx context.Context) ([]string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(window.__airlockHits || ['no hook in this document'])`))
}

// Eval evaluates a JavaScript expression (DevTools evaluation, which the
// page's CSP does not restrict) and decodes its JSON value into T.
func Eval[T any](ctx context.Context, expr string) (T, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// WaitFor evaluates a JavaScript expression until it is true, or fails
// after timeout. (chromedp.Poll compiles its predicate with new Function,
// which the pages' CSP refuses, so the loop runs here.)
func WaitFor(ctx context.Context, expr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("waiting %s for %s: %w", timeout, expr, last)
			}
			return fmt.Errorf("waiting %s for %s: still false", timeout, expr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Login fills and submits the login form at base+"/ui/login" and waits for
// the pending page.
func Login(ctx context.Context, base, name, password string) error {
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.ID("reviewer")),
		chromedp.SendKeys(chromedp.ID("reviewer"), name),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-button")),
	); err != nil {
		return err
	}
	return WaitFor(ctx, `location.pathname === '/ui/pending' && document.readyState === 'complete'`, testkit.Patience)
}

// Fit is how the page in a tab fits its screen.
type Fit struct {
	// Width and Height are the viewport's, in CSS pixels; ScrollWidth is
	// the document's width.
	Width, Height, ScrollWidth int
	// Wide are the first elements wider than the screen that no box that
	// scrolls (and fits) holds, as tag.class.
	Wide []string
	// Cut are the first shown text inputs whose text or placeholder is
	// wider than their box, as name="…".
	Cut []string
}

// Problem is what does not fit, in words, or "" when all of it does.
func (f Fit) Problem() string {
	var p []string
	if f.ScrollWidth > f.Width || len(f.Wide) > 0 {
		p = append(p, fmt.Sprintf("the page is %d px wide in a %d px screen; too wide: %q", f.ScrollWidth, f.Width, f.Wide))
	}
	if len(f.Cut) > 0 {
		p = append(p, fmt.Sprintf("inputs whose placeholder or text is cut: %q", f.Cut))
	}
	return strings.Join(p, "; ")
}

// Fits measures how the page in ctx fits its screen. An element wider
// than the screen is fine inside a box that scrolls, if that box fits.
func Fits(ctx context.Context) (Fit, error) {
	return Eval[Fit](ctx, `(function () {
		const w = window.innerWidth;
		return {
			Width: w, Height: window.innerHeight,
			ScrollWidth: document.documentElement.scrollWidth,
			Wide: Array.from(document.querySelectorAll('body *')).filter(function (e) {
				if (e.getBoundingClientRect().right <= w + 0.5) return false;
				for (let a = e.parentElement; a; a = a.parentElement) {
					if (getComputedStyle(a).overflowX !== 'visible') return a.getBoundingClientRect().right > w + 0.5;
				}
				return true;
			}).map(e => e.tagName + '.' + e.className).slice(0, 5),
			// scrollWidth counts typed text, not a placeholder: measure that
			// in the input's font. A number input keeps 20 px for its spin
			// buttons.
			Cut: Array.from(document.querySelectorAll('input')).filter(function (e) {
				if (e.type === 'hidden' || e.clientWidth === 0) return false;
				if (e.scrollWidth > e.clientWidth) return true;
				const cs = getComputedStyle(e), c = document.createElement('canvas').getContext('2d');
				c.font = cs.font;
				const room = e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - (e.type === 'number' ? 20 : 0);
				return e.value === '' && c.measureText(e.placeholder).width > room;
			}).map(e => 'name="' + e.name + '"').slice(0, 5),
		};
	})()`)
}

// Screenshot saves a PNG of the element sel (or of the page when sel is
// empty) as name in the test's artifact directory (go test -artifacts
// keeps it), and also under dir when dir is not empty (the committed copy,
// written with -update).
func Screenshot(t testing.TB, ctx context.Context, sel, name, dir string) {
	t.Helper()
	var png []byte
	var err error
	// An image of a whole page or card is taller than a screen: elements
	// that stick to the screen's edge (the decision bar) would land in its
	// middle, over other content. Put them back in place for the image.
	unstick := `document.querySelectorAll('*').forEach(function (e) { if (getComputedStyle(e).position === 'sticky') { e.dataset.unstuck = '1'; e.style.position = 'static'; } }), true`
	restick := `document.querySelectorAll('[data-unstuck]').forEach(function (e) { e.style.position = ''; delete e.dataset.unstuck; }), true`
	if _, err := Eval[bool](ctx, unstick); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	defer Eval[bool](ctx, restick)
	// Headless Chromium sometimes reports a zero-width page for a moment
	// after a navigation; set the viewport and try again shortly.
	for attempt := range 5 {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
			chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900))
		}
		if sel == "" {
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		} else {
			png, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	save(t, png, name, dir)
}

// ScreenOf sets the tab's viewport to width × height CSS pixels and saves
// a PNG of what is on that first screen, as Screenshot saves it.
func ScreenOf(t testing.TB, ctx context.Context, width, height int64, name, dir string) {
	t.Helper()
	var png []byte
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if err = chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
			continue
		}
		if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			break
		}
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	save(t, png, name, dir)
}

// save writes png as name in the test's artifact directory, and under dir
// when dir is not empty.
func save(t testing.TB, png []byte, name, dir string) {
	t.Helper()
	dirs := []string{artifactDir(t)}
	if dir != "" {
		dirs = append(dirs, dir)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

func artifactDir(t testing.TB) string {
	if a, ok := t.(interface{ ArtifactDir() string }); ok {
		return a.ArtifactDir()
	}
	return t.TempDir()
}

// JSON is a helper for messages: v as compact JSON, cut at 300 bytes.
func JSON(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.TrimSpace(s)
}
