package main

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"slices"
	"strconv"
	"time"
)

// The plot's colours, by path index, and their names for the legend.
var (
	plotColors = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, // blue
		{0xff, 0x7f, 0x0e, 0xff}, // orange
		{0x2c, 0xa0, 0x2c, 0xff}, // green
		{0xd6, 0x27, 0x28, 0xff}, // red
		{0x94, 0x67, 0xbd, 0xff}, // purple
	}
	plotColorNames = []string{"blue", "orange", "green", "red", "purple"}
)

// plot draws one panel per mode with the CDF of every path's latencies,
// with the standard library only (digits from a built-in 3×5 font).
func (r *report) plot() image.Image {
	const pw, ph, margin, gap = 560, 360, 48, 24
	rows := (len(r.modes) + 1) / 2
	w := 2*pw + gap + 2*margin
	h := rows*(ph+margin) + margin
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for mi, mode := range r.modes {
		x0 := margin + (mi%2)*(pw+gap)
		y0 := margin + (mi/2)*(ph+margin)
		var xmax time.Duration
		sorted := make([][]time.Duration, len(mode.results))
		for i, res := range mode.results {
			sorted[i] = slices.Sorted(slices.Values(res.lat))
			xmax = max(xmax, percentile(sorted[i], .995))
		}
		step := niceStep(msf(xmax) / 6)
		xmaxMS := math.Ceil(msf(xmax)/step) * step
		px := func(v float64) int { return x0 + int(v/xmaxMS*float64(pw-1)) }
		py := func(f float64) int { return y0 + ph - 1 - int(f*float64(ph-1)) }
		grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
		black := color.RGBA{0, 0, 0, 0xff}
		for _, f := range []float64{.25, .5, .75, .95} {
			hline(img, x0, x0+pw-1, py(f), grey)
		}
		for v := step; v <= xmaxMS+1e-9; v += step {
			vline(img, px(v), y0, y0+ph-1, grey)
		}
		// Axes and ticks.
		hline(img, x0, x0+pw-1, y0+ph-1, black)
		vline(img, x0, y0, y0+ph-1, black)
		for v := 0.0; v <= xmaxMS+1e-9; v += step {
			vline(img, px(v), y0+ph-1, y0+ph+4, black)
			label := strconv.FormatFloat(v, 'f', -1, 64)
			drawText(img, px(v)-textWidth(label)/2, y0+ph+9, label, black)
		}
		for _, f := range []float64{0, .5, 1} {
			hline(img, x0-5, x0, py(f), black)
			label := strconv.FormatFloat(f, 'f', -1, 64)
			drawText(img, x0-8-textWidth(label), py(f)-5, label, black)
		}
		// The mode: "1" or "16" above the panel, the number in flight.
		drawText(img, x0, y0-18, strconv.Itoa(mode.conc), black)
		for i := range sorted {
			n := len(sorted[i])
			prevX, prevY := px(min(msf(sorted[i][0]), xmaxMS)), py(0)
			for k, d := range sorted[i] {
				x := px(min(msf(d), xmaxMS))
				y := py(float64(k+1) / float64(n))
				line(img, prevX, prevY, x, prevY, plotColors[i]) // step: across, then up
				line(img, x, prevY, x, y, plotColors[i])
				prevX, prevY = x, y
			}
		}
	}
	return img
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func hline(img *image.RGBA, x1, x2, y int, c color.RGBA) {
	for x := x1; x <= x2; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y1, y2 int, c color.RGBA) {
	for y := y1; y <= y2; y++ {
		img.SetRGBA(x, y, c)
	}
}

// line draws an axis-parallel segment two pixels thick.
func line(img *image.RGBA, x1, y1, x2, y2 int, c color.RGBA) {
	if x1 > x2 {
		x1, x2 = x2, x1
	}
	if y1 > y2 {
		y1, y2 = y2, y1
	}
	for x := x1; x <= x2; x++ {
		for y := y1; y <= y2; y++ {
			img.SetRGBA(x, y, c)
			img.SetRGBA(x+1, y, c)
			img.SetRGBA(x, y-1, c)
		}
	}
}

// font3x5 holds digits and '.' as five rows of three bits.
var font3x5 = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2},
}

const fontScale = 2

func textWidth(s string) int { return len(s) * 4 * fontScale }

func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, ch := range s {
		g := font3x5[ch]
		for row := range 5 {
			for col := range 3 {
				if g[row]&(4>>col) == 0 {
					continue
				}
				for dy := range fontScale {
					for dx := range fontScale {
						img.SetRGBA(x+col*fontScale+dx, y+row*fontScale+dy, c)
					}
				}
			}
		}
		x += 4 * fontScale
	}
}
