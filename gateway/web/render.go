package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
)

//go:embed templates/*.html static/*
var assets embed.FS

// pages are parsed once, at start: each page is the layout plus its own
// file, so their "content" blocks do not collide.
var pages = parsePages("login", "pending", "runs", "action", "audit", "error", "continue", "reveal", "device")

func parsePages(names ...string) map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts.html"))
	m := map[string]*template.Template{}
	for _, n := range names {
		m[n] = template.Must(template.Must(base.Clone()).ParseFS(assets, "templates/"+n+".html"))
	}
	return m
}

// pageData is what every page gets.
type pageData struct {
	Title    string
	Reviewer string
	CSRF     string
	Flash    *flash
	Message  string
	Problem  string
	Status   int
	Now      time.Time
	Data     any
}

// pendingData is the pending page's Data.
type pendingData struct {
	Cards    []Card
	Poll     string
	Interval int64
}

func (h *Handler) data(st *reqState, title string, data any) *pageData {
	d := &pageData{Title: title, Now: h.o.Now(), Data: data}
	if st != nil {
		d.Reviewer, d.CSRF = st.s.reviewer.Name(), st.s.csrf
		if title != "" {
			d.Flash = h.sessions.takeFlash(st.s)
		}
	}
	return d
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, page string, d *pageData) {
	if d.Now.IsZero() {
		d.Now = h.o.Now()
	}
	var buf bytes.Buffer
	if err := pages[page].ExecuteTemplate(&buf, "layout.html", d); err != nil {
		h.log.Error("rendering a page", "page", page, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (h *Handler) renderFragment(w http.ResponseWriter, name string, d *pageData) {
	var buf bytes.Buffer
	if err := pages["pending"].ExecuteTemplate(&buf, name, d); err != nil {
		h.log.Error("rendering a fragment", "name", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// cardView is what the card template gets: the card, and what it needs of
// the page.
type cardView struct {
	Card
	CSRF string
	Now  time.Time
}

// whoView is what the "who-body" template gets: a Run or *Run, and
// whether to show its weak-evidence warnings.
type whoView struct {
	Run  any
	Warn bool
}

var funcs = template.FuncMap{
	"cardView":   func(p *pageData, c Card) cardView { return cardView{Card: c, CSRF: p.CSRF, Now: p.Now} },
	"reveal":     Reveal,
	"revealText": RevealText,
	"actionFlags": func(a Action) []FieldFlag {
		return FieldFlags(field{"command", a.Command}, field{"outcome detail", a.Detail}, field{"approval reason", a.ApprovalReason})
	},
	"cardFlags": func(c Card) []FieldFlag { return FieldFlags(cardFields(c)...) },
	"runFlags":  func(r Run) []FieldFlag { return FieldFlags(runFields(&r)...) },
	// whoView: the card shows a run's weak-evidence warnings in its
	// header, the runs page beside the process.
	"whoView": func(run any, warn bool) whoView { return whoView{Run: run, Warn: warn} },
	// endReason: why a run ended, in the words airlock runs list uses.
	"endReason": func(r Run) string { return api.EndReasonText(r.EndReason, r.Actions) },
	"time":      func(t time.Time) string { return fmtTime(t) },
	"iso":       func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") },
	"dur":       fmtDur,
	"left": func(now, t time.Time) string {
		if !t.After(now) {
			return "expired"
		}
		return fmtDur(t.Sub(now).Truncate(time.Second))
	},
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return fmtDur(now.Sub(t).Truncate(time.Second)) + " ago"
	},
	"lines": func(s string) int { return strings.Count(s, "\n") + 1 },
	"size":  fmtSize,
	"join":  strings.Join,
	"secs":  func(d time.Duration) int64 { return int64(d / time.Second) },
	"eq64":  func(a, b time.Duration) bool { return a == b },
	"add":   func(a, b int) int { return a + b },
	"deref": func(p *int) int { return *p },
	"short": func(s string) string {
		if len(s) > 16 {
			return s[:16] + "…"
		}
		return s
	},
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// fmtDur writes a duration the way people read one: 1h 30m, 2m 5s, 45s.
func fmtDur(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h >= 24 && h%24 == 0 && m == 0 && s == 0:
		return fmt.Sprintf("%dd", h/24)
	case h > 0 && m == 0 && s == 0:
		return fmt.Sprintf("%dh", h)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0 && s == 0:
		return fmt.Sprintf("%dm", m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

func fmtSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/1024)
	}
	return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
}
