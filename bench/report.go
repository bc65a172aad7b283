package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Markdown writes the report as tables with drover/colly and drover/raw
// ratios of unique pages per second.
func (r *Report) Markdown(w io.Writer) {
	o := r.Opts
	fmt.Fprintf(w, "## drover benchmark, %s\n\n", r.Start.Format(time.DateTime))
	fmt.Fprintf(w, "Load average at start: %s (2 cores; above about 1.5 the machine was shared and the numbers are noisy).\n\n", r.Load)
	fmt.Fprintf(w, "### Plain web: %d hosts x %d pages, %d per host, %s between starts\n\n", o.Hosts, o.PagesPerHost, o.PerHostConcurrency, o.PerHostDelay)
	fmt.Fprintln(w, "pages/s: unique pages over the server's span (first to last request start); wall: over the crawler's own time, drover's including workflow start and the drain check. CPU s/1k pages: the crawler's process (drover: scheduler, fetchers, workflow worker and in-memory Kafka together); Temporal and RabbitMQ apart. RSS: peak (crawler: Maxrss; brokers: VmHWM, RabbitMQ's since it started, shared with other users).")
	fmt.Fprintln(w)
	// drover/colly compares with the best Colly row.
	var colly, raw float64
	for _, res := range r.Plain {
		switch res.Kind {
		case KindColly:
			colly = max(colly, res.PagesPerSec())
		case KindRaw:
			raw = res.PagesPerSec()
		}
	}
	fmt.Fprintln(w, "| run | in flight | pages | pages/s | wall pages/s | dup fetches | missing | CPU s/1k pages | Temporal CPU s/1k | RabbitMQ CPU s/1k | peak RSS MB | Temporal HWM MB | RabbitMQ HWM MB | /colly | /raw | note |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, res := range r.Plain {
		ratioC, ratioR := "", ""
		if res.Kind == KindDrover {
			ratioC, ratioR = ratio(res.PagesPerSec(), colly), ratio(res.PagesPerSec(), raw)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.0f | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			res.Name, res.InFlight, res.Pages, res.PagesPerSec(), res.WallPagesPerSec(), res.Duplicates, res.Missing,
			perK(res.CPU, res.Pages), brokerPerK(res, res.TemporalCPU), brokerPerK(res, res.RabbitCPU),
			mb(res.MaxRSS), mb(res.TemporalHWM), mb(res.RabbitHWM), ratioC, ratioR, note(res))
	}
	if len(r.Polite) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Politeness-bound web: %d hosts x %d pages, 1 per host, %s between starts\n\n", o.PoliteHosts, o.PolitePages, o.PoliteDelay)
	fmt.Fprintln(w, "bound: hosts / delay pages/s (robots.txt requests count against it too). min gap: the smallest time between two request starts to one host as the server saw them.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | pages | pages/s | bound | % of bound | wall pages/s | min gap | dup fetches | missing | CPU s/1k pages | note |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, res := range r.Polite {
		pct := 0.0
		if res.Bound > 0 {
			pct = 100 * res.PagesPerSec() / res.Bound
		}
		gap := res.MinGap.Round(100 * time.Microsecond).String()
		if res.MinGap < o.PoliteDelay {
			gap += " (VIOLATION)"
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f%% | %.0f | %s | %d | %d | %s | %s |\n",
			res.Name, res.Pages, res.PagesPerSec(), res.Bound, pct, res.WallPagesPerSec(), gap,
			res.Duplicates, res.Missing, perK(res.CPU, res.Pages), note(res))
	}
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func perK(d time.Duration, pages int) string {
	if pages == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", d.Seconds()*1000/float64(pages))
}

func brokerPerK(res Result, d time.Duration) string {
	if res.Kind != KindDrover {
		return "-"
	}
	return perK(d, res.Pages)
}

func mb(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

func note(res Result) string {
	var n []string
	if res.State != "" && res.Kind == KindDrover {
		n = append(n, res.State)
	}
	if res.Err != "" {
		e := res.Err
		if len(e) > 80 {
			e = e[:80] + "..."
		}
		n = append(n, "error: "+strings.ReplaceAll(e, "|", "/"))
	}
	return strings.Join(n, "; ")
}
