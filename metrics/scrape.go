package metrics

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ScrapeGauges reads unlabelled samples, or samples named with their
// exact label set (`name{campaign="x"}`), from a Prometheus text endpoint,
// all from one scrape; a name the scrape lacks is an error.
func ScrapeGauges(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, name := range names {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				if out[name], err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
					return nil, fmt.Errorf("%s: %s: %w", url, name, err)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("%s: no %s", url, name)
		}
	}
	return out, nil
}
