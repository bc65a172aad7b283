package page

import (
	"crypto/sha1"
	"encoding/base32"
	"time"
)

// Revisit profiles: why a fetch is recorded as a revisit of an earlier
// capture rather than as a capture of its own (WARC 1.1, 6.7.2 and 6.7.3).
const (
	// RevisitNotModified: the server answered 304 Not Modified to a
	// conditional request (If-None-Match, If-Modified-Since).
	RevisitNotModified = "server-not-modified"
	// RevisitIdenticalDigest: the server answered in full, and the payload
	// has the digest of the earlier capture.
	RevisitIdenticalDigest = "identical-payload-digest"
)

// Revisit makes a Page a revisit record: the content is the earlier
// capture's, which it names, and the Page carries no body of its own
// (Body is empty; StatusLine and Header are this fetch's).
type Revisit struct {
	// Profile is RevisitNotModified or RevisitIdenticalDigest.
	Profile string
	// RefersToURI and RefersToDate name the earlier capture: its URL and
	// its fetch time, as its record carries them (WARC-Target-URI and
	// WARC-Date of the WARC response record, the key and time of the Kafka
	// record, url and fetched_at of the PostgreSQL row).
	RefersToURI  string
	RefersToDate time.Time
	// Digest is the earlier capture's payload digest (PayloadDigest).
	Digest string
}

// Capture is what a fetch history keeps of a URL's last full capture: its
// status and validators, its payload digest (PayloadDigest) and its fetch
// time, which with the URL (or URI) name the stored record a revisit
// refers to.
type Capture struct {
	Status       int       `json:"status"`
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"last_modified,omitempty"`
	Digest       string    `json:"digest"`
	Date         time.Time `json:"date"`
	// URI is the URL whose record holds the capture when it is not the
	// URL's own: a page stored as a revisit of another URL's identical
	// payload (campaign.Config.Dedup) refers, then and later, to that
	// URL's record. Empty: the URL's own.
	URI string `json:"uri,omitempty"`
}

// RefersTo is the URL of the record holding the capture: URI, or own.
func (c *Capture) RefersTo(own string) string {
	if c.URI != "" {
		return c.URI
	}
	return own
}

// Conditional reports whether a request for the capture's URL can be
// conditional: the capture has a validator to send.
func (c *Capture) Conditional() bool {
	return c != nil && (c.ETag != "" || c.LastModified != "")
}

// PayloadDigest is the digest of a body as every sink records it and as
// WARC-Payload-Digest carries it: "sha1:" and the base32 of its SHA-1, of
// the body as the server sent it (Content-Encoding kept).
func PayloadDigest(body []byte) string {
	s := sha1.Sum(body)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}
