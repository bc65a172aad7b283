package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
)

// FetchRobots fetches rootURL's /robots.txt (rootURL like
// "http://host:port"), following up to 5 redirects, reading and decoding at
// most RobotsBodyCap bytes. Body is the decoded content. A network error or
// an address guard refusal is in Err; the status, whatever it is, in Status.
// Reason and HostDown are set when the outcome makes the host's robots.txt
// unreachable (ParseRobots): a network error (Classify), a 5xx (page.Reason5xx)
// or a 429 (page.Reason4xx); a 4xx other than 429 means "no robots.txt" and is no
// failure.
func (f *Fetcher) FetchRobots(ctx context.Context, rootURL string) RobotsResult {
	var answered time.Time
	rr := f.fetchRobots(ctx, rootURL, &answered)
	rr.Answered = answered
	return rr
}

func (f *Fetcher) fetchRobots(ctx context.Context, rootURL string, answered *time.Time) RobotsResult {
	base, err := url.Parse(strings.TrimRight(rootURL, "/") + "/robots.txt")
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return RobotsResult{Err: fmt.Errorf("robots.txt of %q: %w", rootURL, urlrule.ErrInvalidURL), Reason: page.ReasonInvalid}
	}
	fctx, cancel := context.WithTimeout(ctx, f.timeouts.Response)
	defer cancel()
	target := base.String()
	for hop := 0; ; hop++ {
		r, err := f.do(fctx, target, nil, urlrule.RobotsBodyCap, nil, answered)
		if err != nil {
			err = fmt.Errorf("robots.txt: %w", urlrule.UnwrapURLError(err))
			if ctx.Err() != nil {
				return RobotsResult{Err: err}
			}
			reason, down := Classify(err)
			return RobotsResult{Err: err, Reason: reason, HostDown: down}
		}
		code := r.resp.StatusCode
		if code >= 300 && code < 400 && hop < maxRobotsRedirects {
			loc := r.resp.Header.Get("Location")
			cur, _ := url.Parse(target)
			next, err := urlrule.Normalize(loc, cur, nil)
			if loc != "" && err == nil {
				target = next
				continue
			}
		}
		body := r.mem
		if code >= 200 && code < 300 {
			if d, _, err := decodeBody(body, r.resp.Header.Get("Content-Encoding"), urlrule.RobotsBodyCap); err == nil {
				body = d
			}
		}
		rr := RobotsResult{Status: code, Body: body, IP: r.ip}
		if code >= 500 || code == http.StatusTooManyRequests {
			rr.Reason = statusReason(code)
		}
		return rr
	}
}
