package session

import (
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/page"
)

// Control requests and replies: one request, one reply, on a control
// session (RoleControl).

// Request is a control request.
type Request struct {
	Op       string           `json:"op"` // "seed", "stats", "close"
	Campaign *campaign.Config `json:"campaign"`
	URLs     []string         `json:"urls,omitempty"` // seed
	// Delete (close): remove the campaign's queues and seen marks.
	Delete bool `json:"delete,omitempty"`
	// Final (close): the campaign is over; refuse its fetcher sessions
	// from now on (Delete implies it).
	Final bool `json:"final,omitempty"`
	// Reason (failures): only the records with this reason.
	Reason string `json:"reason,omitempty"`
	// Keys (end): the fetcher sessions to end (Hello.Key).
	Keys []string `json:"keys,omitempty"`
	// Live (seed): the seeds add to a running campaign (a seed list), so
	// a scheduler that closed it refuses them rather than declare its
	// queues again.
	Live bool `json:"live,omitempty"`
	// Probe (forget_history): only check that the lineage could be
	// dropped here, dropping nothing.
	Probe bool `json:"probe,omitempty"`
	// List (urls): which URLs of the campaign to list.
	List *URLQuery `json:"list,omitempty"`
	// Slots (slots, between schedulers): starts asked of the clocks this
	// scheduler owns; Started: starts fetchers reported under them.
	Slots   []SlotAsk   `json:"slots,omitempty"`
	Started []SlotStart `json:"started,omitempty"`
	// Digests (digests): the payload digests to look up in the lineage's
	// digest index (Campaign.ID names the lineage).
	Digests []string `json:"digests,omitempty"`
}

// SlotAsk asks the scheduler that owns Key's clock (a politeness key
// shared by the schedulers: campaign.IPKey) for a start, as a campaign of
// its own named From spaced by Delay.
type SlotAsk struct {
	Key   string        `json:"key"`
	From  string        `json:"from"`
	Delay time.Duration `json:"delay"`
}

// SlotStart reports that a request under Key started Ago before the
// report was sent (the fetcher's own report of it): the owner moves the
// clock there, as for its own campaigns' outcomes.
type SlotStart struct {
	Key   string        `json:"key"`
	Ago   time.Duration `json:"ago"`
	Delay time.Duration `json:"delay"`
}

// Control operations.
const (
	OpSeed  = "seed"
	OpStats = "stats"
	OpClose = "close"
	// OpFailures lists a campaign's failure records (Reason filters);
	// OpForget drops them.
	OpFailures = "failures"
	OpForget   = "forget"
	// OpForgetHistory drops a lineage's fetch history (Campaign.ID names
	// the lineage: `starter forget`). Refused while a campaign open on
	// the scheduler reads or writes it.
	OpForgetHistory = "forget_history"
	// OpCheck asks whether the scheduler can run a campaign (a valid config,
	// a policy it has) without creating anything: the starter's preflight.
	OpCheck = "check"
	// OpEnd ends the campaign's fetcher sessions named by Keys (FrameEnd)
	// and refuses them from now on, on this scheduler: how a pause, a stop
	// or a scale-down reaches the fleet without waiting for a heartbeat.
	OpEnd = "end"
	// OpRules gives the scheduler a campaign's live rules
	// (Campaign.Live, campaign.Rules; Campaign.ID is the frontier key). It
	// answers once they apply and no lease of a URL they exclude is out.
	OpRules = "rules"
	// OpSlots is a scheduler asking another for starts on the clocks the
	// other owns (Request.Slots, Started); no Campaign. The reply's
	// Waits say, in the asks' order, how long each must wait: 0 is a
	// start taken now, for the asker to use at once; more is a turn
	// reserved for it, which it asks for again when it comes.
	OpSlots = "slots"
	// OpDigests looks payload digests up in a lineage's digest index
	// (campaign.Config.Dedup): the reply's Captures say, in the digests'
	// order, which capture stored each payload in full (nil: none known
	// here). A scheduler too old to know the op answers an error, and the
	// fetcher stores its pages in full.
	OpDigests = "digests"
)

// MaxDigestsAsked bounds the digests of one OpDigests request.
const MaxDigestsAsked = 1024

// Reply answers a Request.
type Reply struct {
	Error string `json:"error,omitempty"`
	Stats *Stats `json:"stats,omitempty"`
	// Seeded counts the seed URLs published (confirmed).
	Seeded int `json:"seeded,omitempty"`
	// Failures answers OpFailures, at most MaxFailuresReply of them;
	// FailuresTotal is how many there are.
	Failures      []failure.Record `json:"failures,omitempty"`
	FailuresTotal int              `json:"failures_total,omitempty"`
	// Ended answers OpEnd: how many of the named sessions were open here.
	Ended int `json:"ended,omitempty"`
	// URL answers OpURL.
	URL *URLState `json:"url,omitempty"`
	// Page answers OpURLs.
	Page *URLPage `json:"page,omitempty"`
	// Waits answers OpSlots.
	Waits []time.Duration `json:"waits,omitempty"`
	// Pushed and Stale answer OpRules: the scheduler sends newer rules to
	// the campaign's fetcher sessions that asked (Hello.Rules), and Stale
	// of them did not ask (a worker from before FrameRules): their scope
	// changes only with a new session. A scheduler from before leaves
	// Pushed unset.
	Pushed bool `json:"pushed,omitempty"`
	Stale  int  `json:"stale,omitempty"`
	// Captures answers OpDigests.
	Captures []*page.Capture `json:"captures,omitempty"`
}

// MaxFailuresReply bounds the failure records in one reply (well within
// MaxFrame); a longer list is cut, and its total said.
const MaxFailuresReply = 50_000
