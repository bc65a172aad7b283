// Command seenbench measures the scheduler's seen-set stores (issue 12): a
// crawl's calls (Done per delivery; Queued of the links, MarkQueued of the
// new ones and MarkDone of the pages per outcome batch) from concurrent
// writers until -urls URLs are queued and done, then the bytes on disk per
// URL. It prints a markdown table.
//
//	cd bench && go run ./cmd/seenbench                   # 10 M URLs, every store
//	cd bench && go run ./cmd/seenbench -urls 1000000 -stores pebble
package main

import (
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/drover-crawl/drover/bench"
)

func main() {
	o := bench.DefaultSeenOptions()
	stores := flag.String("stores", strings.Join(slices.Sorted(maps.Keys(bench.SeenStores)), ","), "stores to measure, comma-separated")
	flag.IntVar(&o.URLs, "urls", o.URLs, "URLs queued and done")
	flag.IntVar(&o.Writers, "writers", o.Writers, "concurrent record goroutines")
	flag.IntVar(&o.PagesPerBatch, "pages", o.PagesPerBatch, "pages per outcome batch")
	flag.IntVar(&o.LinksPerPage, "links", o.LinksPerPage, "links looked up per page (one of them new)")
	flag.StringVar(&o.Dir, "dir", "", "directory for the stores (default: the system's temporary directory)")
	flag.Parse()
	var rs []bench.SeenResult
	for _, s := range strings.Split(*stores, ",") {
		fmt.Fprintf(os.Stderr, "seenbench: %s: %d URLs ...\n", s, o.URLs)
		r := o.RunSeen(s)
		if r.Err != "" {
			log.Printf("seenbench: %s: %s", s, r.Err)
		}
		rs = append(rs, r)
	}
	bench.WriteSeenTable(os.Stdout, o, rs)
}
