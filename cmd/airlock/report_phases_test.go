package main

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Where an action's time goes, per path: the report's stacked bars.

// gatewayPhases are the gateway's phases in the order an action passes
// them (gateway/engine/phases.go), as airlock_action_phase_seconds names
// them.
var gatewayPhases = []string{"check", "run", "policy", "requested", "approval", "slot", "intent",
	"dial", "handshake", "auth", "session", "command", "output", "result"}

// phaseAcc sums phase durations per path during the sequential rounds.
type phaseAcc struct {
	mu      sync.Mutex
	sums    map[string]map[string]time.Duration // path → phase → total
	order   map[string][]string
	gateway map[string]map[string]time.Duration // path → gateway phase → total
}

func (a *phaseAcc) add(path string, names []string, ds ...time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sums == nil {
		a.sums, a.order = map[string]map[string]time.Duration{}, map[string][]string{}
	}
	if a.sums[path] == nil {
		a.sums[path] = map[string]time.Duration{}
	}
	for i, n := range names {
		if _, ok := a.sums[path][n]; !ok {
			a.order[path] = append(a.order[path], n)
		}
		a.sums[path][n] += ds[i]
	}
}

func (a *phaseAcc) addGateway(path, phase string, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gateway == nil {
		a.gateway = map[string]map[string]time.Duration{}
	}
	if a.gateway[path] == nil {
		a.gateway[path] = map[string]time.Duration{}
	}
	a.gateway[path][phase] += d
}

// phaseBar is one path's mean action, cut into its phases.
type phaseBar struct {
	path  string
	total time.Duration // mean latency
	segs  []phaseSeg
}

type phaseSeg struct {
	name string
	d    time.Duration // mean
}

// bars turns the sums into mean phases per action of the sequential mode.
// airlock-ssh's bar is the helper's start (measured apart), the gateway's
// phases (its own histogram), and the rest of the agent's wait: the local
// socket, HTTP and the answer's way back. A path whose phases are not
// measured (openssh) is one segment.
func (a *phaseAcc) bars(seq reportMode, paths []reportPath, helper time.Duration) []phaseBar {
	var out []phaseBar
	for i, p := range paths {
		res := seq.results[i]
		n := time.Duration(len(res.lat))
		var total time.Duration
		for _, d := range res.lat {
			total += d
		}
		bar := phaseBar{path: p.name, total: total / n}
		var known time.Duration
		switch {
		case a.gateway[p.name] != nil:
			if p.name == "airlock-ssh" {
				bar.segs = append(bar.segs, phaseSeg{"helper start", helper})
				known = helper
			}
			var gw []phaseSeg
			for _, ph := range gatewayPhases {
				d := a.gateway[p.name][ph] / n
				gw = append(gw, phaseSeg{ph, d})
				known += d
			}
			bar.segs = append(bar.segs, phaseSeg{"socket, HTTP, answer", max(0, bar.total-known)})
			bar.segs = append(bar.segs, gw...)
		case a.sums[p.name] != nil:
			for _, ph := range a.order[p.name] {
				bar.segs = append(bar.segs, phaseSeg{ph, a.sums[p.name][ph] / n})
			}
		default:
			bar.segs = []phaseSeg{{"whole (not split)", bar.total}}
		}
		out = append(out, bar)
	}
	return out
}

// phaseSums reads the sums of airlock_action_phase_seconds by phase.
func (g gatewayProbe) phaseSums(t *testing.T) map[string]float64 {
	resp, err := http.Get(g.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `airlock_action_phase_seconds_sum{phase="`)
		if !ok {
			continue
		}
		ph, v, _ := strings.Cut(rest, `"} `)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metrics: %q", sc.Text())
		}
		out[ph] = f
	}
	return out
}

// phaseColor gives every phase name one colour in every bar: the agent's
// side in greys, the gateway's own work in blues and purples, the SSH
// connection (sshd's share) in oranges, greens and reds.
func phaseColor(name string) color.RGBA {
	switch name {
	case "helper start":
		return color.RGBA{0x99, 0x99, 0x99, 0xff}
	case "socket, HTTP, answer":
		return color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	case "check":
		return color.RGBA{0xc6, 0xdb, 0xef, 0xff}
	case "run":
		return color.RGBA{0x9e, 0xca, 0xe1, 0xff}
	case "policy":
		return color.RGBA{0x6b, 0xae, 0xd6, 0xff}
	case "requested":
		return color.RGBA{0x42, 0x92, 0xc6, 0xff}
	case "approval":
		return color.RGBA{0x21, 0x71, 0xb5, 0xff}
	case "slot":
		return color.RGBA{0x08, 0x45, 0x94, 0xff}
	case "intent":
		return color.RGBA{0x6a, 0x51, 0xa3, 0xff}
	case "dial", "dial, handshake, auth":
		return color.RGBA{0xfd, 0xae, 0x6b, 0xff}
	case "handshake":
		return color.RGBA{0xf1, 0x69, 0x13, 0xff}
	case "auth":
		return color.RGBA{0xd9, 0x48, 0x01, 0xff}
	case "session":
		return color.RGBA{0x74, 0xc4, 0x76, 0xff}
	case "command":
		return color.RGBA{0x23, 0x8b, 0x45, 0xff}
	case "close":
		return color.RGBA{0xa1, 0xd9, 0x9b, 0xff}
	case "output":
		return color.RGBA{0x9e, 0x9a, 0xc8, 0xff}
	case "result":
		return color.RGBA{0x3f, 0x00, 0x7d, 0xff}
	}
	return color.RGBA{0xe3, 0x1a, 0x1c, 0xff} // whole (not split)
}

// plotPhases draws one horizontal stacked bar per path, a scale in ms and
// a legend.
func (r *report) plotPhases() image.Image {
	const left, right, top, barH, barGap, width = 110, 30, 30, 34, 18, 1000
	face := basicfont.Face7x13
	var legend []string
	seen := map[string]bool{}
	for _, b := range r.bars {
		for _, s := range b.segs {
			if !seen[s.name] {
				seen[s.name] = true
				legend = append(legend, s.name)
			}
		}
	}
	const perRow = 5
	legendRows := (len(legend) + perRow - 1) / perRow
	axisY := top + len(r.bars)*(barH+barGap)
	h := axisY + 40 + legendRows*20 + 10
	img := image.NewRGBA(image.Rect(0, 0, width, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	black := color.RGBA{0, 0, 0, 0xff}
	text := func(x, y int, s string) {
		d := font.Drawer{Dst: img, Src: image.NewUniform(black), Face: face, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	var maxTotal time.Duration
	for _, b := range r.bars {
		maxTotal = max(maxTotal, b.total)
	}
	step := niceStep(msf(maxTotal) / 8)
	xmax := math.Ceil(msf(maxTotal)/step) * step
	plotW := width - left - right
	px := func(ms float64) int { return left + int(ms/xmax*float64(plotW)) }
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	for v := 0.0; v <= xmax+1e-9; v += step {
		vline(img, px(v), top-6, axisY, grey)
		label := strconv.FormatFloat(v, 'f', -1, 64)
		text(px(v)-len(label)*7/2, axisY+16, label)
	}
	text(left+plotW/2-60, axisY+32, "ms per action (mean)")
	for i, b := range r.bars {
		y := top + i*(barH+barGap)
		text(8, y+barH/2+4, b.path)
		at := 0.0
		for _, s := range b.segs {
			x1, x2 := px(at), px(at+msf(s.d))
			c := phaseColor(s.name)
			for x := x1; x < x2; x++ {
				vline(img, x, y, y+barH, c)
			}
			at += msf(s.d)
		}
		text(px(at)+4, y+barH/2+4, fmt.Sprintf("%.1f", msf(b.total)))
	}
	for i, name := range legend {
		x := left + (i%perRow)*((width-left)/perRow)
		y := axisY + 44 + (i/perRow)*20
		c := phaseColor(name)
		for dx := range 12 {
			vline(img, x+dx, y-10, y, c)
		}
		text(x+16, y, name)
	}
	return img
}

// processFloor is what any helper process costs on this machine: the mean
// start and exit of a static Go program that prints one line, built here
// the way airlock-ssh is, timed as airlock-ssh --version is.
func processFloor(t *testing.T) time.Duration {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n"), 0o644)
	build := exec.Command("go", "build", "-o", "hello", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the hello world: %v: %s", err, out)
	}
	var sum time.Duration
	for range 50 {
		t0 := time.Now()
		if out, err := exec.Command(filepath.Join(dir, "hello")).CombinedOutput(); err != nil {
			t.Fatalf("hello: %v: %s", err, out)
		}
		sum += time.Since(t0)
	}
	return sum / 50
}

// phasesMarkdown is the table beside the picture.
func (r *report) phasesMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Where an action's time goes\n\n")
	fmt.Fprintf(b, "![Stacked bars: the mean sequential action of every path, cut into its phases](benchmarks-phases.png)\n\n")
	fmt.Fprintf(b, "The mean sequential action of each path, in ms, cut into phases. For **airlock-ssh** the\n")
	fmt.Fprintf(b, "gateway's phases come from its own `airlock_action_phase_seconds` histogram (the same\n")
	fmt.Fprintf(b, "phases its OpenTelemetry spans carry); *helper start* is `airlock-ssh --version` timed apart;\n")
	fmt.Fprintf(b, "*socket, HTTP, answer* is the rest of the agent's wait (the local socket, the request,\n")
	fmt.Fprintf(b, "the answer's way back, and for airlock-ssh the rest of its process). **api client** is the same request\n")
	fmt.Fprintf(b, "without a helper process. *dial* to *command* are the SSH connection: that share is sshd's.\n")
	fmt.Fprintf(b, "**sshexec** splits by `sshexec.Result.Timings`, **xcrypto** by its calls; **openssh** is not split.\n\n")
	fmt.Fprintf(b, "A process costs something on its own here: a static Go program that prints one line and exits takes\n")
	fmt.Fprintf(b, "%.1f ms to start and end (mean of 50, timed like the helper, whose own start was %.1f ms). No helper that\n", msf(r.floor), msf(r.helper))
	fmt.Fprintf(b, "starts once per action, as `airlock-ssh` must (agents keep no sessions), can come closer to bare `sshexec.Run`\n")
	fmt.Fprintf(b, "than that.\n\n")
	fmt.Fprintf(b, "| path | phases (ms) | total |\n| --- | --- | ---: |\n")
	for _, bar := range r.bars {
		var parts []string
		for _, s := range bar.segs {
			parts = append(parts, fmt.Sprintf("%s %.2f", s.name, msf(s.d)))
		}
		fmt.Fprintf(b, "| %s | %s | %.1f |\n", bar.path, strings.Join(parts, " · "), msf(bar.total))
	}
}
