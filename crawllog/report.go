package crawllog

import (
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Totals are the counts of a set of crawl log lines.
type Totals struct {
	// Attempts are the fetch attempts, robots.txt included: every line but
	// the schedulers' (dead-lettered, dropped).
	Attempts int64 `json:"attempts"`
	// Pages are the pages stored (OutcomePage), as `status --json`'s
	// pages_fetched counts them; Revisits the ones of them stored as
	// revisits (its pages_unchanged).
	Pages    int64 `json:"pages"`
	Revisits int64 `json:"revisits"`
	// Failed are the permanent failures stored (OutcomeFailed), as
	// pages_failed counts them.
	Failed int64 `json:"failed"`
	// Errors are the attempts that left their URL to a later one: retries
	// and pages no sink stored (the fetchers' errors).
	Errors int64 `json:"errors"`
	// Robots are the robots.txt fetches.
	Robots int64 `json:"robots"`
	// DeadLettered are the URLs the schedulers dead-lettered; Dropped the
	// ones they settled without a fetch (robots.txt, an exclude).
	DeadLettered int64 `json:"dead_lettered"`
	Dropped      int64 `json:"dropped"`
	// Bytes are the bodies' bytes of every attempt, as the servers sent
	// them.
	Bytes int64 `json:"bytes"`
}

func (t *Totals) add(l Line) {
	switch l.Outcome {
	case OutcomeDeadLettered:
		t.DeadLettered++
		return
	case OutcomeDropped:
		t.Dropped++
		return
	}
	t.Attempts++
	t.Bytes += l.Size
	switch l.Outcome {
	case OutcomePage:
		t.Pages++
		if l.Revisit != "" {
			t.Revisits++
		}
	case OutcomeFailed:
		t.Failed++
	case OutcomeRetry, OutcomeUnstored:
		t.Errors++
	case OutcomeRobots:
		t.Robots++
	}
}

// Row is the totals of one key (a host, a MIME type, a status or a seed).
type Row struct {
	Key string `json:"key"`
	Totals
}

// Report summarises a campaign's crawl log: its totals, and the same by
// host, MIME type, status and seed. Its JSON is `starter report --json`'s.
type Report struct {
	Campaign string   `json:"campaign"`
	Dir      string   `json:"dir"`
	Files    []string `json:"files"`
	// Unreadable counts lines that are not JSON (a line cut by a full
	// disk); they count nowhere else.
	Unreadable int    `json:"unreadable"`
	Total      Totals `json:"total"`
	ByHost     []Row  `json:"by_host"`
	ByMIME     []Row  `json:"by_mime"`
	ByStatus   []Row  `json:"by_status"`
	// BySeed counts each line under the seed its URL was reached from
	// (following via back to a URL with none); a robots.txt under
	// RobotsSeed.
	BySeed []Row `json:"by_seed"`
}

// RobotsSeed is the seed key of robots.txt fetches, which no seed leads
// to.
const RobotsSeed = "(robots.txt)"

// Summarize reads the crawl log of the run key under root and reports on
// it. It holds every URL and its via in memory, to find seeds: about 200
// bytes a line.
func Summarize(root, key string) (Report, error) {
	dir := Dir(root, key)
	var lines []Line
	files, bad, err := ReadDir(dir, func(l Line) {
		l.Stored, l.Annotations, l.Error = nil, nil, "" // not summarised
		lines = append(lines, l)
	})
	if err != nil {
		return Report{}, err
	}
	r := Summary(lines)
	r.Campaign, r.Dir, r.Files, r.Unreadable = key, dir, files, bad
	if r.Files == nil {
		r.Files = []string{}
	}
	return r, nil
}

// Summary is the report of lines.
func Summary(lines []Line) Report {
	via := make(map[string]string, len(lines))
	for _, l := range lines {
		if _, ok := via[l.URL]; !ok && l.Via != "" {
			via[l.URL] = l.Via
		}
	}
	var r Report
	host, mimeT, status, seed := map[string]*Totals{}, map[string]*Totals{}, map[string]*Totals{}, map[string]*Totals{}
	for _, l := range lines {
		r.Total.add(l)
		at(host, hostOf(l.URL)).add(l)
		at(mimeT, mimeOf(l.MIME)).add(l)
		at(status, statusOf(l)).add(l)
		s := RobotsSeed
		if l.Outcome != OutcomeRobots {
			s = seedOf(l.URL, via)
		}
		at(seed, s).add(l)
	}
	r.ByHost, r.ByMIME, r.ByStatus, r.BySeed = rows(host), rows(mimeT), rows(status), rows(seed)
	return r
}

func at(m map[string]*Totals, k string) *Totals {
	t := m[k]
	if t == nil {
		t = &Totals{}
		m[k] = t
	}
	return t
}

// rows sorts m by attempts, most first, then by key.
func rows(m map[string]*Totals) []Row {
	out := make([]Row, 0, len(m))
	for k, t := range m {
		out = append(out, Row{Key: k, Totals: *t})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Attempts != out[j].Attempts {
			return out[i].Attempts > out[j].Attempts
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// seedOf follows via from u back to a URL with none (or one not in the
// log, or after as many steps as there are URLs: a loop).
func seedOf(u string, via map[string]string) string {
	for range len(via) + 1 {
		v := via[u]
		if v == "" {
			return u
		}
		if _, ok := via[v]; !ok {
			return v
		}
		u = v
	}
	return u
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "-"
	}
	return p.Host
}

func mimeOf(ct string) string {
	if ct == "" {
		return "-"
	}
	if m, _, err := mime.ParseMediaType(ct); err == nil {
		return m
	}
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// statusOf is the HTTP status, or for an attempt with none "0 " and why.
func statusOf(l Line) string {
	if l.Status != 0 {
		return strconv.Itoa(l.Status)
	}
	if l.Reason != "" {
		return "0 " + l.Reason
	}
	return "0"
}
