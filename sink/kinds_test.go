package sink

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/sink/sinkuri"
)

// TestEveryKindHasOneEntry: every kind of sinkuri.Kinds has one entry in
// kinds, with its open and its check, and kinds holds no other.
func TestEveryKindHasOneEntry(t *testing.T) {
	require.Equal(t, len(sinkuri.Kinds), len(kinds), "entries of kinds")
	for _, k := range sinkuri.Kinds {
		n := 0
		for _, e := range kinds {
			if e.uri == k {
				n++
				require.True(t, e.open != nil && e.check != nil, "kind %s has no open or no check", k.Name)
			}
		}
		require.Equal(t, 1, n, "entries of kind %s in kinds", k.Name)
	}
}

// TestKindLabels: the metrics label of a URI is its kind's name.
func TestKindLabels(t *testing.T) {
	for uri, want := range map[string]string{
		"kafka://k/t": "kafka", "warc:/d": "warc", "postgres://db/x": "postgres",
		"postgresql://db/x": "postgres", "s3://b/x": "other", "%zz": "other",
	} {
		require.Equal(t, want, Kind(uri), uri)
	}
}
