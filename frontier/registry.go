package frontier

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/drover-crawl/drover/campaign"
)

// The scheduler's campaigns: each has one actor, made on first use with
// its queues declared, and a campaign closed here for good leaves a tomb.

// actor returns the campaign's actor, creating it (and declaring the
// campaign's queues) on first use. The declares (about 29 round trips to
// RabbitMQ) run under createMu, not mu, so that Stats and the other
// campaigns' sessions do not wait for them.
func (s *Server) actor(cfg campaign.Config) (*campaignActor, error) {
	a, err := s.actorOf(cfg)
	if a != nil && cfg.Live.Version > 0 {
		// A fetcher session carries the rules as they were when it
		// started: newer than these here when an Update could not
		// reach this scheduler.
		if _, err := s.takeRules(cfg.FrontierKey(), cfg.Live); err != nil {
			s.log.Error("live rules of a fetcher session not taken", "campaign", cfg.FrontierKey(), "version", cfg.Live.Version, "err", err)
		}
	}
	return a, err
}

// actorOf returns the campaign's actor, made if it has none yet.
func (s *Server) actorOf(cfg campaign.Config) (*campaignActor, error) {
	key := cfg.FrontierKey()
	if a, err := s.existingActor(key); a != nil || err != nil {
		return a, err
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if a, err := s.existingActor(key); a != nil || err != nil {
		return a, err
	}
	if err := s.retireEarlier(cfg); err != nil {
		return nil, err
	}
	// A campaign that has queues must have them all (vanished.go).
	vanished, err := s.vanishedOf(key)
	if err != nil {
		return nil, err
	}
	version, err := s.declare(cfg)
	if err != nil {
		return nil, err
	}
	// The live rules stored here may be newer than the config's (a fetcher
	// session started before an operator's last change).
	if cfg.Live, err = s.latestRules(key, cfg.Live); err != nil {
		return nil, err
	}
	a, err := newCampaignActor(s, cfg)
	if err != nil {
		return nil, err
	}
	a.legacyParks = !movedParks(version)
	if len(vanished) > 0 {
		a.consumer().shardsVanished(vanished)
	}
	s.mu.Lock()
	if _, err := s.existingActorLocked(key); err != nil || s.closed {
		// Closed (the campaign, or the server) while it was declared.
		s.mu.Unlock()
		a.stop(10 * time.Second)
		if err == nil {
			err = errors.New("scheduler closed")
		}
		return nil, err
	}
	s.campaigns[key] = a
	s.mu.Unlock()
	return a, nil
}

// existingActor returns the campaign's actor if it has one, or the error
// of a campaign closed for good.
func (s *Server) existingActor(id string) (*campaignActor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.existingActorLocked(id)
}

func (s *Server) existingActorLocked(id string) (*campaignActor, error) {
	if a := s.campaigns[id]; a != nil {
		return a, nil
	}
	if at, ok := s.tombs[id]; ok {
		return nil, fmt.Errorf("campaign %s was closed at %s", id, at.Format(time.RFC3339))
	}
	return nil, nil
}

// declare declares the campaign's queues, of cfg's queue type or this
// scheduler's default, keeping the queues of a campaign started before
// with their arguments. It returns the topology version declared.
func (s *Server) declare(cfg campaign.Config) (int, error) {
	return Topology{Campaign: cfg.FrontierKey()}.declareKeeping(s.mq.channel, cmp.Or(cfg.QueueType, s.cfg.QueueType))
}
