package activities

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
)

// crawlLogs shares a campaign run's crawl log file among its FetchSessions
// in this process: one file per worker process.
var crawlLogs = newPool[*crawllog.Writer]()

// acquireCrawlLog returns the crawl log of cfg's run in this process and
// the function that gives it back; nil when the campaign keeps none.
func acquireCrawlLog(ctx context.Context, cfg campaign.Config, identity string) (*crawllog.Writer, func() error, error) {
	if cfg.CrawlLog == "" {
		return nil, func() error { return nil }, nil
	}
	if identity == "" {
		identity = fmt.Sprintf("worker-%d", os.Getpid())
	}
	made := [3]string{cfg.CrawlLog, cfg.FrontierKey(), identity}
	return crawlLogs.acquire(ctx, cfg.ID, made, func() (*crawllog.Writer, func() error, error) {
		w, err := crawllog.Create(cfg.CrawlLog, cfg.FrontierKey(), identity)
		if err != nil {
			return nil, nil, err
		}
		return w, w.Close, nil
	})
}

// logLine writes l to the campaign's crawl log, when it keeps one. A line
// that cannot be written is said in the worker's log: the crawl goes on
// (logStored is the exception).
func (r *Runner) logLine(ctx context.Context, l crawllog.Line) {
	if err := r.writeLine(l); err != nil {
		activity.GetLogger(ctx).Error("crawl log line not written", "url", l.URL, "outcome", l.Outcome, "error", err)
	}
}

func (r *Runner) writeLine(l crawllog.Line) error {
	if r.log == nil {
		return nil
	}
	l.Time = time.Now().UTC()
	l.Worker = r.c.Worker
	return r.log.Write(l)
}

// robotsLine is the line of a robots.txt fetch.
func robotsLine(url string, rr fetch.RobotsResult, took time.Duration) crawllog.Line {
	l := crawllog.Line{Outcome: crawllog.OutcomeRobots, Status: rr.Status, Size: int64(len(rr.Body)),
		URL: url + "/robots.txt", Path: urlrule.HopPrerequisite, DurationMS: took.Milliseconds(), Reason: rr.Reason}
	if rr.Err != nil {
		l.Error = rr.Err.Error()
	} else {
		l.Digest = page.PayloadDigest(rr.Body)
	}
	return l
}

// fetchLine is the line of a page fetch, with no outcome yet.
func fetchLine(req fetch.Request, res fetch.Result, took time.Duration) crawllog.Line {
	l := crawllog.Line{Status: res.Status, URL: req.URL, Path: req.Path, Via: req.Parent,
		DurationMS: took.Milliseconds(), Attempt: req.Attempt, MaxAttempts: req.MaxAttempts, Reason: res.Reason}
	if res.Err != nil {
		l.Error = res.Err.Error()
	}
	p := res.Page
	if p == nil {
		return l
	}
	l.Status, l.Size, l.MIME = p.Status, int64(len(p.Body)), p.ContentType
	if p.Err != "" {
		l.Error = p.Err
	}
	switch {
	case p.Revisit != nil:
		l.Digest, l.Revisit = p.Revisit.Digest, p.Revisit.Profile
		l.Annotations = append(l.Annotations, crawllog.AnnotRevisit)
	case p.Status != 0:
		l.Digest = page.PayloadDigest(p.Body)
	}
	if p.Truncated {
		l.Annotations = append(l.Annotations, crawllog.AnnotTruncated)
	}
	if res.Reason == page.ReasonRobots {
		l.Annotations = append(l.Annotations, crawllog.AnnotRobots)
	}
	return l
}
