package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two campaigns at a concurrency of 1 on one key take turns: the place a
// lease frees goes to the campaign in line, which is woken, not back to
// the campaign whose lease ended.
func TestKeyPlacesTakeTurns(t *testing.T) {
	p := newKeyPlaces()
	now := time.Now()
	const key = "h.example"
	woken := map[string]int{}
	wake := func(c string) func() { return func() { woken[c]++ } }

	require.False(t, p.full(key, "a", 1, now))
	p.take(key, "a")
	require.True(t, p.full(key, "b", 1, now), "b asks while a's lease is out")
	p.wait(key, "b", wake("b"))
	p.wait(key, "b", wake("b")) // a campaign is in line once
	require.True(t, p.full(key, "a", 1, now))
	p.wait(key, "a", wake("a"))

	p.release(key, "a", now)
	assert.Equal(t, map[string]int{"b": 1}, woken, "a's lease ended: b, first in line, is woken")
	assert.True(t, p.full(key, "a", 1, now), "the freed place is b's, not a's again")
	assert.True(t, p.full(key, "c", 1, now), "nor a newcomer's")
	require.False(t, p.full(key, "b", 1, now))
	p.take(key, "b")
	assert.True(t, p.full(key, "b", 1, now))

	p.release(key, "b", now)
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, woken, "b's lease ended: a, in line, is woken")
	assert.False(t, p.full(key, "a", 1, now))
	assert.True(t, p.full(key, "b", 1, now))
}

// A held place its campaign does not take within placeHold (no fetcher
// credit, or it stopped) goes to whoever asks; a campaign that leaves
// the line is not woken.
func TestKeyPlacesHoldIsGivenUp(t *testing.T) {
	p := newKeyPlaces()
	now := time.Now()
	const key = "h.example"
	woken := 0
	p.take(key, "a")
	p.wait(key, "b", func() { woken++ })
	p.wait(key, "c", func() { woken += 100 })
	p.leave(key, "c")
	p.release(key, "a", now)
	require.Equal(t, 1, woken, "b woken, c (gone) not")
	require.True(t, p.full(key, "a", 1, now.Add(placeHold/2)))
	require.False(t, p.full(key, "a", 1, now.Add(2*placeHold)), "b never came for its place")
	p.take(key, "a")
	p.release(key, "a", now.Add(2*placeHold))
	assert.Equal(t, 1, woken, "no one in line any more")
	assert.Empty(t, p.shard(key).keys, "a key with nothing out and no one waiting is dropped")
}

// Campaigns with different concurrencies on one key: each is held to its
// own, counted over both; at a concurrency of 2 two places are free while
// one is held for a campaign in line.
func TestKeyPlacesConcurrencyIsEachCampaigns(t *testing.T) {
	p := newKeyPlaces()
	now := time.Now()
	const key = "h.example"
	p.take(key, "a")
	assert.True(t, p.full(key, "b", 1, now), "b at 1: a's one lease fills the key")
	assert.False(t, p.full(key, "c", 2, now), "c at 2: a second place is free")
	p.take(key, "c")
	p.wait(key, "b", func() {})
	p.release(key, "a", now)
	assert.True(t, p.full(key, "c", 2, now), "c's lease and b's held place fill c's two")
	assert.False(t, p.full(key, "b", 1, now), "b takes the place held for it")
}
