package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeScalePlot draws the scale scenario's curve into a PNG at path: on
// top, pages/s over each interval; below, the scheduler's and the
// worker's RSS; both against the pages fetched (the test web's count).
func writeScalePlot(path string, r ScaleResult) error {
	rate := plot.New()
	rate.Title.Text = fmt.Sprintf("drover, make dev's stack, fleet %d: %d hosts x %d pages", r.Fleet, r.Hosts, r.PagesPerHost)
	rate.X.Label.Text = "pages fetched"
	rate.Y.Label.Text = "pages/s (over each interval)"
	rate.Y.Min = 0
	mem := plot.New()
	mem.X.Label.Text = "pages fetched"
	mem.Y.Label.Text = "RSS MB"
	mem.Y.Min = 0
	// Bottom right: under the curves, which start low and stay high.
	mem.Legend.Top, mem.Legend.Left = false, false
	mem.Legend.YOffs = vg.Points(8)

	var ps plotter.XYs
	rss := map[string]plotter.XYs{}
	for i, row := range r.Rows {
		// The end's sample follows the last interval's by moments: its
		// rate, over no pages, is not a point of the curve.
		end := i > 0 && i == len(r.Rows)-1 && row.Pages == r.Rows[i-1].Pages
		if i > 0 && !end {
			ps = append(ps, plotter.XY{X: float64(row.Pages), Y: row.PagesPerSec})
		}
		for _, name := range []string{"scheduler", "worker"} {
			rss[name] = append(rss[name], plotter.XY{X: float64(row.Pages), Y: float64(row.RSS[name]) / (1 << 20)})
		}
	}
	l, err := plotter.NewLine(ps)
	if err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	l.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	l.Width = vg.Points(1.5)
	rate.Add(plotter.NewGrid(), l)
	mem.Add(plotter.NewGrid())
	for _, c := range []struct {
		name  string
		color color.Color
	}{
		{"scheduler", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"worker", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	} {
		name := c.name
		l, err := plotter.NewLine(rss[name])
		if err != nil {
			return fmt.Errorf("scale plot: %w", err)
		}
		l.Color, l.Width = c.color, vg.Points(1.5)
		mem.Add(l)
		mem.Legend.Add(name, l)
	}

	// One pages axis for both panels, from 0 to the last sample's pages.
	for _, p := range []*plot.Plot{rate, mem} {
		p.X.Min, p.X.Max = 0, float64(r.Rows[len(r.Rows)-1].Pages)
		p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
			ticks := plot.DefaultTicks{}.Ticks(min, max)
			for i := range ticks {
				if ticks[i].Label != "" {
					ticks[i].Label = fmt.Sprintf("%.0f", ticks[i].Value)
				}
			}
			return ticks
		})
	}
	img := vgimg.New(10*vg.Inch, 8*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(16), PadY: vg.Points(16)}
	plots := [][]*plot.Plot{{rate}, {mem}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("scale plot: %s: %w", path, err)
	}
	return f.Close()
}
