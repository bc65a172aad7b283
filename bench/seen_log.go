package bench

import "github.com/drover-crawl/drover/frontier"

// The old store, measured against Pebble until it is removed.
func init() {
	SeenStores["log"] = func(dir string) (seenStore, error) { return frontier.OpenLogSeen(dir) }
}
