package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Markdown writes the report as tables, one per scenario that ran: for the
// plain web with drover/colly and drover/raw ratios of unique pages per
// second.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "## drover benchmark, %s\n\n", r.Start.Format(time.DateTime))
	fmt.Fprintf(w, "Load average at start: %s (2 cores; above about 1.5 the machine was shared and the numbers are noisy).\n", r.Load)
	r.markdownPlain(w)
	r.markdownPolite(w)
	r.markdownSlowHost(w)
	r.markdownQueued(w)
	r.markdownSinks(w)
	r.markdownHosts(w)
	r.markdownRecrawl(w)
	r.markdownScale(w)
}

func (r *Report) markdownPlain(w io.Writer) {
	o := r.Opts
	if len(r.Plain) == 0 {
		return
	}
	best := map[string]float64{}
	var raw float64
	for _, res := range r.Plain {
		if res.Err != "" {
			continue
		}
		switch res.Kind {
		case KindColly, KindScrapy:
			best[res.Kind] = max(best[res.Kind], res.PagesPerSec())
		case KindRaw:
			raw = res.PagesPerSec()
		}
	}
	section(w, fmt.Sprintf("Plain web: %d hosts x %d pages, drover at %d per host and %s between starts (the dev-stack row at its own settings)", o.Hosts, o.PagesPerHost, o.PerHostConcurrency, o.PerHostDelay),
		[]string{"pages/s: unique pages over the server's span (first to last request start); wall: over the crawler's own time, drover's including workflow start and the drain check. Pages, duplicates, misses and robots.txt-disallowed hits are counted by the test web's server. CPU s/1k pages: the crawler's process (in-process drover: scheduler, fetchers, workflow worker and in-memory Kafka together; Scrapy: its python3 process); procs: drover's other processes (worker, scheduler, Kafka: utime+stime deltas from /proc/PID/stat over the crawl); Temporal and RabbitMQ apart (RabbitMQ is the machine's shared broker: its delta includes anyone else's traffic); total: all of them. The machine is shared: compare rows of one run, and CPU per page rather than pages/s. RSS: peak (crawler: Maxrss; other processes: VmHWM, RabbitMQ's since it started)."},
		"| run | in flight | pages | pages/s | wall pages/s | dup fetches | missing | disallowed hits | CPU s/1k pages: crawler / procs / Temporal / RabbitMQ = total | peak RSS MB: crawler / procs / Temporal / RabbitMQ | /best colly | /best scrapy | /raw | configuration | note |",
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|")
	for _, res := range r.Plain {
		ratioC, ratioS, ratioR := "", "", ""
		switch res.Kind {
		case KindDrover:
			ratioC, ratioS, ratioR = ratio(res.PagesPerSec(), best[KindColly]), ratio(res.PagesPerSec(), best[KindScrapy]), ratio(res.PagesPerSec(), raw)
		case KindColly, KindScrapy:
			if res.Err == "" && res.PagesPerSec() == best[res.Kind] {
				if res.Kind == KindColly {
					ratioC = "(best)"
				} else {
					ratioS = "(best)"
				}
			}
		}
		procCPU, procHWM := procsUsage(res)
		cpu := fmt.Sprintf("%s / %s / %s / %s = **%s**", perK(res.CPU, res.Pages), perKOr(procCPU, res.Pages, len(res.WorkerProcs) > 0),
			brokerPerK(res, res.TemporalCPU), brokerPerK(res, res.RabbitCPU), perK(res.TotalCPU(), res.Pages))
		rss := fmt.Sprintf("%s / %s / %s / %s", mb(res.MaxRSS), mb(procHWM), mb(res.TemporalHWM), mb(res.RabbitHWM))
		n := note(res)
		if pn := procsNote(res); pn != "" {
			n = strings.TrimPrefix(n+"; "+pn, "; ")
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.0f | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			res.Name, res.InFlight, res.Pages, res.PagesPerSec(), res.WallPagesPerSec(), res.Duplicates, res.Missing, res.Disallowed,
			cpu, rss, ratioC, ratioS, ratioR, strings.ReplaceAll(res.Config, "|", "/"), n)
	}
	for _, res := range r.Plain {
		if res.Kind != KindDrover || !res.DevStack {
			continue
		}
		fmt.Fprintf(w, "\nGoals (issue 15), %s: %s x the best Colly row (goal >= 2.0: %s), %s of the raw ceiling (goal >= 0.25: %s), %s CPU s per 1,000 pages in all (goal <= 0.5: %s), %d missing and %d duplicates (goal 0 and 0: %s).\n",
			res.Name, ratio(res.PagesPerSec(), best[KindColly]), met(best[KindColly] > 0 && res.PagesPerSec() >= 2*best[KindColly]),
			ratio(res.PagesPerSec(), raw), met(raw > 0 && res.PagesPerSec() >= 0.25*raw),
			perK(res.TotalCPU(), res.Pages), met(res.Pages > 0 && res.TotalCPU().Seconds()*1000/float64(res.Pages) <= 0.5),
			res.Missing, res.Duplicates, met(res.Missing == 0 && res.Duplicates == 0 && res.Err == ""))
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// procsUsage sums drover's other processes (worker, scheduler, Kafka).
func procsUsage(res Result) (cpu time.Duration, hwm int64) {
	for _, p := range res.WorkerProcs {
		cpu += p.CPU
		hwm += p.HWM
	}
	return cpu, hwm
}

// procsNote gives each of drover's other processes its share.
func procsNote(res Result) string {
	var parts []string
	for _, p := range res.WorkerProcs {
		extra := ""
		if p.Sessions > 0 {
			extra += fmt.Sprintf(", %d sessions", p.Sessions)
		}
		if p.Workflow {
			extra += ", workflow"
		}
		kern := ""
		if k := p.Kernel.perPage(res.Pages); k != "" {
			kern = ", " + k
		}
		parts = append(parts, fmt.Sprintf("%s%s: %s CPU s/1k, %s MB%s", p.Identity, extra, perK(p.CPU, res.Pages), mb(p.HWM), kern))
	}
	for _, o := range []struct {
		name string
		k    Kernel
	}{{"temporal", res.TemporalKernel}, {"rabbitmq", res.RabbitKernel}} {
		if k := o.k.perPage(res.Pages); k != "" {
			parts = append(parts, o.name+": "+k)
		}
	}
	if res.WebCPU > 0 {
		parts = append(parts, fmt.Sprintf("test web (not counted): %s CPU s/1k", perK(res.WebCPU, res.Pages)))
	}
	return strings.Join(parts, "; ")
}

func perKOr(d time.Duration, pages int, ok bool) string {
	if !ok {
		return "-"
	}
	return perK(d, pages)
}

func (r *Report) markdownPolite(w io.Writer) {
	o := r.Opts
	if len(r.Polite) == 0 {
		return
	}
	section(w, fmt.Sprintf("Politeness-bound web: %d hosts x %d pages, 1 per host, %s between starts", o.PoliteHosts, o.PolitePages, o.PoliteDelay),
		[]string{"bound: hosts / delay pages/s (robots.txt requests count against it too). achievable: what this web allows at all, its largest host needing the most requests a delay apart (host 0 serves three pages more). min gap: the smallest time between two request starts to one host as the server saw them."},
		"| run | pages | pages/s | bound | % of bound | achievable | % of achievable | wall pages/s | min gap | dup fetches | missing | CPU s/1k pages | note |",
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, res := range r.Polite {
		pct, apct := 0.0, 0.0
		if res.Bound > 0 {
			pct = 100 * res.PagesPerSec() / res.Bound
		}
		if res.Achievable > 0 {
			apct = 100 * res.PagesPerSec() / res.Achievable
		}
		gap := res.MinGap.Round(100 * time.Microsecond).String()
		if res.MinGap < o.PoliteDelay {
			gap += " (VIOLATION)"
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f%% | %.0f | %.0f%% | %.0f | %s | %d | %d | %s | %s |\n",
			res.Name, res.Pages, res.PagesPerSec(), res.Bound, pct, res.Achievable, apct, res.WallPagesPerSec(), gap,
			res.Duplicates, res.Missing, perK(res.CPU, res.Pages), note(res))
	}
}

func (r *Report) markdownSlowHost(w io.Writer) {
	o := r.Opts
	if len(r.SlowHost) == 0 {
		return
	}
	section(w, fmt.Sprintf("Slow host (issue 3): %d hosts x %d pages at %s, with and without one host of %d URLs (all seeded) at Crawl-delay %s", o.SlowHosts, o.SlowPages, o.SlowDelay, o.SlowHosts*o.SlowPages, o.SlowCrawlDelay),
		[]string{fmt.Sprintf("fast span: the run's first request (any host) to the last request to a fast host, by the server's clock; each run's campaign gets the stop signal once every fast page was requested. %d per host, fleet %d.", o.PerHostConcurrency, o.SlowFleet),
			"shared / other: the fast hosts whose shard queue is the slow host's (frontier.ShardOf) and the rest, and when their last page was requested (from the run's first request). Slow host min gap: between any two requests (robots.txt included) / between pages."},
		"| run | fast pages | missing | fast span | fast pages/s | shared hosts done at | other hosts done at | dup fetches | slow URLs seeded | slow host requests | slow host min gap | CPU s/1k pages | note |",
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, res := range r.SlowHost {
		pps := perSec(float64(res.OtherPages), res.OtherSpan)
		slowReq, gap := "-", "-"
		if res.WithSlow {
			slowReq = fmt.Sprint(res.SlowRequests)
			gap = res.SlowMinGap.Round(time.Millisecond).String() + " / " + res.SlowMinPageGap.Round(time.Millisecond).String()
		}
		seeded := "-"
		if res.WithSlow {
			seeded = fmt.Sprint(res.SlowSeeded)
		}
		sharedAt := "-"
		if res.SharedHosts > 0 {
			sharedAt = fmt.Sprintf("%d: %s", res.SharedHosts, res.SharedSpan.Round(time.Millisecond))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %.0f | %s | %d: %s | %d | %s | %s | %s | %s | %s |\n", res.Name, res.OtherPages, res.OtherMissing,
			res.OtherSpan.Round(time.Millisecond), pps, sharedAt, o.SlowHosts-res.SharedHosts, res.UnsharedSpan.Round(time.Millisecond), res.Duplicates, seeded, slowReq, gap, perK(res.CPU, res.OtherPages+res.SlowRequests), note(res.Result))
	}
	if pct, ok := SlowHostSlowdown(r.SlowHost); ok {
		verdict := "goal < 10%: met"
		if pct >= 10 {
			verdict = "goal < 10%: NOT met"
		}
		fmt.Fprintf(w, "\nSlowdown of the fast hosts with the slow host: %+.1f%% (%s).\n", pct, verdict)
	}
}

func (r *Report) markdownQueued(w io.Writer) {
	q := r.Queued
	if q == nil {
		return
	}
	section(w, fmt.Sprintf("Queued backlog (issue 3): %d URLs over %d hosts in one campaign's shard queues", q.URLs, q.Hosts),
		[]string{fmt.Sprintf("A scheduler binary with one fetcher session that never gives credit, for %s: it fills its prefetch window, holds up to holdWindow per host and parks the rest. RSS from /proc/PID/status. Seen-set: the same URLs marked queued in a fresh seen.Pebble (WAL and unflushed memtable included).", q.Hold)},
		"| URLs | publish (confirmed) | scheduler VmRSS MB | max VmRSS MB | VmHWM MB | goal | held | acked | parked (published) | still queued | RabbitMQ VmRSS MB before / after publish | seen-set bytes/URL | seen µs/mark | note |",
		"|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|")
	goal := "< 256 MB: met"
	if q.HWM >= 256<<20 || q.HWM == 0 {
		goal = "< 256 MB: NOT met"
	}
	perURL := "-"
	if q.URLs > 0 && q.SeenBytes > 0 {
		perURL = fmt.Sprintf("%.1f", float64(q.SeenBytes)/float64(q.URLs))
	}
	e := errNote(q.Err)
	fmt.Fprintf(w, "| %d | %s (%.0f/s) | %s | %s | %s | %s | %d | %d | %d | %d | %s / %s | %s | %.2f | %s |\n", q.URLs,
		q.Publish.Round(100*time.Millisecond), float64(q.URLs)/max(q.Publish.Seconds(), 1e-9), mb(q.RSS), mb(q.MaxRSS), mb(q.HWM), goal,
		q.Stats.Held, q.Stats.Acked, q.Stats.Published, q.Stats.Queued, mb(q.RabbitRSS0), mb(q.RabbitRSS1), perURL,
		float64(q.SeenPerMark.Nanoseconds())/1e3, e)
}

func (r *Report) markdownSinks(w io.Writer) {
	o := r.Opts
	if len(r.Sinks) == 0 {
		return
	}
	section(w, fmt.Sprintf("Sinks (issue 6): %d goroutines storing %d-byte pages for %s, each Store waited for (durable)", o.SinkWriters, o.SinkPageBytes, o.SinkDuration),
		[]string{"MB/s: body bytes (10^6) per second. CPU: the child process (for Kafka, the in-memory broker is in it too; PostgreSQL's server is not)."},
		"| sink | records | records/s | MB/s | Store p50 | Store p99 | CPU s/1k records | peak RSS MB | on disk MB | note |",
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, res := range r.Sinks {
		disk := "-"
		if res.DiskBytes > 0 {
			disk = fmt.Sprintf("%.1f", float64(res.DiskBytes)/1e6)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %s | %s | %s | %s | %s | %s |\n", res.Name, res.Records, res.RecordsPerSec(), res.MBPerSec(),
			res.P50.Round(100*time.Microsecond), res.P99.Round(100*time.Microsecond), perK(res.CPU, int(res.Records)), mb(res.MaxRSS), disk, note(res))
	}
}

// section starts a scenario's part of the report: its heading, the
// paragraphs that explain the table, and the table's header and alignment
// rows.
func section(w io.Writer, heading string, paragraphs []string, head, align string) {
	fmt.Fprintf(w, "\n### %s\n\n", heading)
	for _, p := range paragraphs {
		fmt.Fprintf(w, "%s\n\n", p)
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, align)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
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
	if res.State != "" && (res.Kind == KindDrover || res.Kind == KindRecrawl) {
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

func (r *Report) markdownHosts(w io.Writer) {
	if len(r.Hosts) == 0 {
		return
	}
	h0 := r.Hosts[0]
	how := "each lease fetched from the virtual web through the fetcher's lookup hook"
	if !h0.Fetch {
		how = "each lease answered at once (no fetch)"
	}
	fmt.Fprintf(w, "\n### Many hosts (issue 15): virtual hosts x %d pages, a scheduler binary, %d sessions x %d leases, %s\n\n", h0.Pages, h0.Fleet, h0.Credit, how)
	fmt.Fprintln(w, "Every page URL is published (confirmed) into a fresh campaign's shards; the scheduler, its prefetch sized to hold them all, holds every one behind a credit-less session (active hosts: all of them). Bytes/host: VmRSS above its baseline with the campaign open and no URL, over the hosts, each holding its pages' deliveries; beside it the Go heap in use right after a collection (live), held and at the end (every URL done: what the scheduler keeps of a host). Then the fleet leases everything (robots.txt + pages) until every outcome is recorded: scheduler CPU (utime+stime, /proc) and wall time per lease granted; links are not reported. x1k: the row's figure over the first row's (flat is 1).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| hosts | URLs | prefetch | publish | fill (CPU µs/URL) | VmRSS MB: base / held | bytes/host: VmRSS / live heap held / live heap end | goal <= 1 KB (VmRSS) | leases | lease phase | CPU µs/lease | x1k | wall µs/lease | x1k | missing / dup | note |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, h := range r.Hosts {
		goal := "met"
		if h.BytesPerHost() > 1024 {
			goal = "NOT met"
		}
		note := errNote(h.Err)
		cpu, wall := perLease(h.LeaseCPU, h.Leases), perLease(h.LeaseWall, h.Leases)
		cpu0, wall0 := perLease(h0.LeaseCPU, h0.Leases), perLease(h0.LeaseWall, h0.Leases)
		urls := h.Hosts * h.Pages
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s (%.1f) | %s / %s | %.0f / %.0f / %.0f | %s | %d | %s | %.1f | %.2f | %.1f | %.2f | %d / %d | %s |\n",
			h.Hosts, urls, h.Prefetch, h.Publish.Round(100*time.Millisecond), h.Fill.Round(100*time.Millisecond), perLease(h.FillCPU, int64(urls)),
			mb(h.BaseRSS), mb(h.HeldRSS), h.BytesPerHost(), h.HeapPerHost(), float64(h.EndHeap-h.BaseHeap)/float64(max(h.Hosts, 1)), goal,
			h.Leases, h.LeaseWall.Round(100*time.Millisecond), cpu, cpu/max(cpu0, 1e-9), wall, wall/max(wall0, 1e-9),
			h.Web.Missing, h.Web.Duplicates, note)
	}
}

// errNote is a table cell for a run's error ("" for none).
func errNote(err string) string {
	if err == "" {
		return ""
	}
	return "error: " + strings.ReplaceAll(firstLine(err), "|", "/")
}

// sinkNames are the recrawl table's column names of the sinks.
var sinkNames = map[string]string{"kafka": "Kafka", "warc": "WARC", "warc-captures": "WARC captures", "postgres": "PostgreSQL"}

func (r *Report) markdownRecrawl(w io.Writer) {
	rc, o := r.Recrawl, r.Opts
	if rc == nil {
		return
	}
	cfg := o.recrawlWeb()
	pageBytes := "8 KiB"
	if cfg.PageBytes > 0 {
		pageBytes = fmt.Sprintf("%d bytes", cfg.PageBytes)
	}
	head, align := "| run | pages | pages/s | wall pages/s | answered 200 / 304 | requests with a validator | dup fetches | missing |", "|---|--:|--:|--:|--:|--:|--:|--:|"
	for _, s := range o.RecrawlSinks {
		head += " " + sinkNames[s] + " MB |"
		align += "--:|"
	}
	head += " CPU s/1k pages: crawler / Temporal / RabbitMQ = total | peak RSS MB | note |"
	align += "--:|--:|---|"
	section(w, fmt.Sprintf("Recrawl (issue 29): %d hosts x %d pages of %s with validators (%d also at a second URL), %.0f%% changed, run 2 with From = run 1", cfg.Hosts, cfg.PagesPerHost, pageBytes, cfg.Duplicates, 100*o.RecrawlChange),
		[]string{fmt.Sprintf("One stack for both runs (its scheduler's seen store holds the fetch history run 2 reads): drover fleet %d, %d per host, %s between starts, sinks %s. Half the pages carry an ETag, half a Last-Modified. Run 1 crawls the web in full; then %d of its %d URLs change (a change of a page changes its second URL too) and run 2 asks for every page with its validators: a 304 is stored as a revisit (WARC revisit record; body-less Kafka record and PostgreSQL row).", o.RecrawlFleet, o.PerHostConcurrency, o.PerHostDelay, strings.Join(o.RecrawlSinks, ", "), rc.Changed, rc.Pages),
			"pages/s over the server's span, answers and validators by the server's count; MB (10^6) that each sink took from the run: WARC its files on disk (gzip per record), Kafka the records' keys, values and headers, PostgreSQL its rows (pg_column_size). CPU as in the plain table (PostgreSQL's server not counted). The last row is run 2 over run 1."},
		head, align)
	for _, res := range rc.Runs {
		fmt.Fprintf(w, "| run %d | %d | %.0f | %.0f | %d / %d | %d | %d | %d |", res.Run, res.Pages, res.PagesPerSec(), res.WallPagesPerSec(),
			res.Answered200, res.Answered304, res.Conditional, res.Duplicates, res.Missing)
		for _, s := range o.RecrawlSinks {
			fmt.Fprintf(w, " %.2f |", float64(res.SinkBytes[s])/1e6)
		}
		fmt.Fprintf(w, " %s / %s / %s = **%s** | %s | %s |\n", perK(res.CPU, res.Pages), perK(res.TemporalCPU, res.Pages), perK(res.RabbitCPU, res.Pages),
			perK(res.TotalCPU(), res.Pages), mb(res.MaxRSS), note(res))
	}
	if len(rc.Runs) == 2 {
		r1, r2 := rc.Runs[0], rc.Runs[1]
		fmt.Fprintf(w, "| **run 2 / run 1** | | **%s** | %s | | | | |", ratio(r2.PagesPerSec(), r1.PagesPerSec()), ratio(r2.WallPagesPerSec(), r1.WallPagesPerSec()))
		for _, s := range o.RecrawlSinks {
			fmt.Fprintf(w, " **%s** |", pct(r2.SinkBytes[s], r1.SinkBytes[s]))
		}
		fmt.Fprintf(w, " %s | | |\n", ratio(perPage(r2.TotalCPU(), r2.Pages), perPage(r1.TotalCPU(), r1.Pages)))
	}
	if len(rc.Runs) == 2 && rc.Pages > rc.Changed {
		var parts []string
		for _, s := range o.RecrawlSinks {
			full := float64(rc.Runs[0].SinkBytes[s]) / float64(rc.Pages)
			revisit := (float64(rc.Runs[1].SinkBytes[s]) - full*float64(rc.Changed)) / float64(rc.Pages-rc.Changed)
			parts = append(parts, fmt.Sprintf("%s %.0f / %.0f", sinkNames[s], full, revisit))
		}
		fmt.Fprintf(w, "\nBytes per page, a page of run 1 / an unchanged page of run 2 (run 2's bytes less its %d changed URLs at run 1's cost, over the other %d): %s. An unchanged page costs about the same whatever the page's size, so run 2's share falls as pages grow (`-recrawl-page-bytes`).\n",
			rc.Changed, rc.Pages-rc.Changed, strings.Join(parts, "; "))
	}
	checks := "every page requested once per run, run 2 sent a validator for every page that answered 200 in run 1, exactly the unchanged pages answered 304: all held."
	if len(rc.Failed) > 0 {
		checks = "FAILED: " + strings.Join(rc.Failed, "; ") + "."
	} else if rc.Err != "" {
		checks = "not all run: " + errNote(rc.Err) + "."
	}
	fmt.Fprintf(w, "\nChecks: %s\n", checks)
}

// pct is a as a percentage of b ("-" when b is 0).
func pct(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

// perPage is d per page in seconds (0 without pages).
func perPage(d time.Duration, pages int) float64 {
	if pages <= 0 {
		return 0
	}
	return d.Seconds() / float64(pages)
}

func (r *Report) markdownScale(w io.Writer) {
	if r.Scale == nil {
		return
	}
	sc, o := r.Scale, r.Opts
	section(w, fmt.Sprintf("Scale: %d hosts x %d pages through make dev's stack, fleet %d, %d per host, %s between starts", sc.Hosts, sc.PagesPerHost, sc.Fleet, o.DevPerHost, o.DevDelay),
		[]string{fmt.Sprintf("%s. One sample every %s from the campaign's start to its end. pages: unique pages of the web served by the sample's time (the test web's count, each page at its first request); pages/s and CPU s/1k pages: over the interval since the previous sample, CPU of every process below together (utime+stime of /proc/PID/stat; RabbitMQ is the machine's shared broker: its share includes anyone else's traffic); RSS: VmRSS at the sample.", sc.Name, o.ScaleEvery)},
		"| elapsed | pages | pages/s | CPU s/1k pages | RSS MB: scheduler | worker | kafka | temporal | rabbitmq |",
		"|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	writeScaleRows(w, sc.Rows)
	fmt.Fprintf(w, "\n%s\n", scaleSummary(*sc))
}

// writeScaleRows writes the scale table's rows.
func writeScaleRows(w io.Writer, rows []ScaleRow) {
	for i, row := range rows {
		rate, cpu := "-", "-"
		if i > 0 {
			rate = fmt.Sprintf("%.0f", row.PagesPerSec)
		}
		if row.CPUPerK >= 0 {
			cpu = fmt.Sprintf("%.2f", row.CPUPerK)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s |", row.Elapsed.Round(100*time.Millisecond), row.Pages, rate, cpu)
		for _, name := range ScaleProcs {
			fmt.Fprintf(w, " %s |", mb(row.RSS[name]))
		}
		fmt.Fprintln(w)
	}
}

// scaleSummary is the line under the scale table.
func scaleSummary(sc ScaleResult) string {
	cpu := "-"
	if c := sc.ScaleCPUPerK(); c >= 0 {
		cpu = fmt.Sprintf("%.2f", c)
	}
	s := fmt.Sprintf("**%d pages** in %s (%s); pages/s over the first fifth of the pages **%.0f**, over the last fifth **%.0f** (last / first %s); CPU s per 1,000 pages overall **%s**; peak RSS MB (VmHWM) scheduler **%s**, worker **%s**, kafka %s; %d missing, %d duplicates (the test web's count).",
		sc.Pages, sc.Wall.Round(time.Second), orDash(sc.State), sc.FirstFifth, sc.LastFifth, ratio(sc.LastFifth, sc.FirstFifth), cpu,
		mb(sc.PeakRSS("scheduler")), mb(sc.PeakRSS("worker")), mb(sc.PeakRSS("kafka")), sc.Missing, sc.Duplicates)
	if sc.Connections > 0 {
		s += fmt.Sprintf(" The web accepted %d connections for %d requests (%.1f requests a connection).", sc.Connections, sc.Requests, float64(sc.Requests)/float64(sc.Connections))
	}
	if names, perK := sc.ProcCPUPerK(); len(names) > 0 {
		var parts []string
		for i, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.3f", n, perK[i]))
		}
		s += " CPU s per 1,000 pages by process: " + strings.Join(parts, ", ") + "."
	}
	if sc.Err != "" {
		s += " Error: " + firstLine(sc.Err)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
