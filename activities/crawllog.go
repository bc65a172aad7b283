package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/urlrule"
)

// crawlLogs shares a campaign run's crawl log among its FetchSessions in
// this process: one file per worker process, one Kafka writer.
var crawlLogs = newPool[*crawlLog]()

// crawlLog is where a campaign's lines go from this process: its file
// (crawl_log) and its topic (crawl_log_topic), either or both.
type crawlLog struct {
	file  *crawllog.Writer
	topic *sink.Kafka
}

// lineTimeout bounds one line's write to the topic.
const lineTimeout = 15 * time.Second

// write writes l to the file, then to the topic; either failing fails it.
func (c *crawlLog) write(l crawllog.Line) error {
	if c.file != nil {
		if err := c.file.Write(l); err != nil {
			return err
		}
	}
	if c.topic == nil {
		return nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("crawl log: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lineTimeout)
	defer cancel()
	if err := c.topic.WriteLine(ctx, l.URL, b); err != nil {
		return fmt.Errorf("crawl log: %w", err)
	}
	return nil
}

func (c *crawlLog) close() error {
	var errs []error
	if c.file != nil {
		errs = append(errs, c.file.Close())
	}
	if c.topic != nil {
		errs = append(errs, c.topic.Close())
	}
	return errors.Join(errs...)
}

// acquireCrawlLog returns the crawl log of cfg's run in this process and
// the function that gives it back; nil when the campaign keeps none.
func acquireCrawlLog(ctx context.Context, cfg campaign.Config, identity string, opts sink.Options) (*crawlLog, func() error, error) {
	if cfg.CrawlLog == "" && cfg.CrawlLogTopic == "" {
		return nil, func() error { return nil }, nil
	}
	if identity == "" {
		identity = fmt.Sprintf("worker-%d", os.Getpid())
	}
	made := [4]string{cfg.CrawlLog, cfg.CrawlLogTopic, cfg.FrontierKey(), identity}
	return crawlLogs.acquire(ctx, cfg.ID, made, func() (*crawlLog, func() error, error) {
		c := &crawlLog{}
		if cfg.CrawlLog != "" {
			w, err := crawllog.Create(cfg.CrawlLog, cfg.FrontierKey(), identity)
			if err != nil {
				return nil, nil, err
			}
			c.file = w
		}
		if cfg.CrawlLogTopic != "" {
			octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sinkOpenTimeout)
			defer cancel()
			k, err := sink.OpenKafkaLines(octx, cfg.CrawlLogTopic, opts)
			if err != nil {
				_ = c.close()
				return nil, nil, fmt.Errorf("crawl_log_topic: %w", err)
			}
			c.topic = k
		}
		return c, c.close, nil
	})
}

// logLine writes l to the campaign's crawl log, when it keeps one. A line
// that cannot be written is said in the worker's log: the crawl goes on
// (storePage's line is the exception).
func (r *Runner) logLine(ctx context.Context, l crawllog.Line) {
	if err := r.writeLine(l); err != nil {
		activity.GetLogger(ctx).Error("crawl log line not written", "url", l.URL, "outcome", l.Outcome, "err", err)
	}
}

func (r *Runner) writeLine(l crawllog.Line) error {
	if r.log == nil {
		return nil
	}
	l.Time = time.Now().UTC()
	l.Worker = r.c.Worker
	return r.log.write(l)
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
