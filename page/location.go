package page

import "sync"

// Location is where a sink stored a page: the crawl log's account of it.
// Kind says which fields are set.
type Location struct {
	// Kind is the sink's: "warc", "kafka" or "postgres" (the name of its
	// kind in sink/sinkuri).
	Kind string `json:"kind"`
	// File and Offset: the WARC file (its path) and the byte offset of the
	// page's response or revisit record (its gzip member) in it, or for a
	// failure of its first record (request or metadata); Length is the
	// bytes from there: the record's, or a failure's records'.
	File   string `json:"file,omitempty"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length,omitempty"`
	// Topic and Partition: the Kafka record's (Offset its offset).
	Topic     string `json:"topic,omitempty"`
	Partition int    `json:"partition,omitempty"`
	// Table: the PostgreSQL table holding the page's row.
	Table string `json:"table,omitempty"`
}

// Locations collects where the sinks stored one page; sinks that store a
// page at once (sink.Multi) add to it concurrently. A nil *Locations
// collects nothing.
type Locations struct {
	mu   sync.Mutex
	list []Location
}

// Add records l. It does nothing on a nil receiver.
func (ls *Locations) Add(l Location) {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	ls.list = append(ls.list, l)
	ls.mu.Unlock()
}

// List returns the locations added so far, in the order they were added.
func (ls *Locations) List() []Location {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]Location(nil), ls.list...)
}
