package frontier

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// Control sessions: one request, one reply, for the starter, the
// workflow's activities and the other schedulers (seed, check, stats,
// close, failures, forget, end, rules, urls, slots, digests).

func (s *Server) serveControl(c net.Conn, fr *session.FrameReader, fw *session.FrameWriter) {
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Minute))
		t, payload, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var req session.Request
		var rep session.Reply
		if t == session.FramePing {
			_ = fw.WriteFrame(session.FramePong, nil)
			if fw.Flush() != nil {
				return
			}
			continue
		}
		if t != session.FrameRequest {
			rep.Error = fmt.Sprintf("unexpected %s frame on a control session", t)
		} else if err := session.Decode(t, payload, &req); err != nil {
			rep.Error = err.Error()
		} else if req.Op == session.OpSlots {
			rep.Waits = s.clocks.answer(req.Slots, req.Started, time.Now())
		} else if req.Campaign == nil || req.Campaign.ID == "" {
			rep.Error = "request without a campaign"
		} else {
			rep = s.control(req)
		}
		if err := fw.WriteFrame(session.FrameReply, rep); err != nil {
			return
		}
		if err := fw.Flush(); err != nil {
			return
		}
	}
}

func (s *Server) control(req session.Request) session.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch req.Op {
	case session.OpSeed:
		n, err := s.seed(ctx, req.Campaign.WithDefaults(), req.URLs, req.Live)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Seeded: n}
	case session.OpCheck:
		if _, err := s.check(req.Campaign.WithDefaults()); err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{}
	case session.OpStats:
		st, err := s.Stats(req.Campaign.ID)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Stats: &st}
	case session.OpFailures, session.OpForget:
		return s.failureOp(req)
	case session.OpForgetHistory:
		if err := s.forgetHistory(req.Campaign.ID, req.Probe); err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{}
	case session.OpEnd:
		return session.Reply{Ended: s.endSessions(req.Campaign.ID, req.Keys)}
	case session.OpDigests:
		cs, err := s.digestCaptures(req.Campaign.ID, req.Digests)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Captures: cs}
	case session.OpURL:
		if len(req.URLs) != 1 {
			return session.Reply{Error: "url: give one URL"}
		}
		st, err := s.urlState(req.Campaign.ID, req.URLs[0])
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{URL: &st}
	case session.OpURLs:
		if req.List == nil {
			return session.Reply{Error: "urls: give a host and a state"}
		}
		page, err := s.urlList(req.Campaign.ID, *req.List)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Page: &page}
	case session.OpRules:
		stale, err := s.setRules(ctx, req.Campaign.ID, req.Campaign.Live)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Pushed: true, Stale: stale}
	case session.OpClose:
		st, err := s.closeCampaign(req.Campaign.ID, req.Final || req.Delete, req.Delete)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Stats: &st}
	}
	return session.Reply{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

// failureOp answers OpFailures (at most MaxFailuresReply records, and
// their total) and OpForget.
func (s *Server) failureOp(req session.Request) session.Reply {
	if req.Op == session.OpForget {
		if err := s.store.DropFailures(req.Campaign.ID); err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{}
	}
	fs, err := s.store.Failures(req.Campaign.ID, req.Reason)
	if err != nil {
		return session.Reply{Error: err.Error()}
	}
	rep := session.Reply{FailuresTotal: len(fs)}
	rep.Failures = fs[:min(len(fs), session.MaxFailuresReply)]
	return rep
}

// seedBurst is how many seeds of one host keep their priority.
const seedBurst = 64

// check says whether this scheduler can run the campaign (its config is
// valid and names a policy the scheduler has), and returns its policy. It
// creates nothing.
func (s *Server) check(cfg campaign.Config) (Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return s.cfg.policy(cfg.Priority)
}

// seed declares the campaign's queues and publishes its seeds (those not
// already queued), confirmed, at depth 0. live: the seeds add to a
// running campaign, refused once it closed here (its queues are gone and
// must not come back).
func (s *Server) seed(ctx context.Context, cfg campaign.Config, urls []string, live bool) (int, error) {
	p, err := s.check(cfg)
	if err != nil {
		return 0, err
	}
	key := cfg.FrontierKey()
	// Seeding starts a run of the campaign, which no other run of its ID
	// may see (retireEarlier).
	s.createMu.Lock()
	err = s.retireEarlier(cfg)
	s.createMu.Unlock()
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	_, closed := s.tombs[key]
	if !live {
		delete(s.tombs, key)
	}
	s.mu.Unlock()
	if closed && live {
		return 0, fmt.Errorf("campaign %s has closed on scheduler %s: it takes no more seeds", key, s.cfg.Name)
	}
	if _, err := s.declare(cfg); err != nil {
		return 0, err
	}
	var keys []seen.Key
	var us []shardURL
	topo := Topology{Campaign: key}
	perHost := map[string]int{}
	for _, raw := range urls {
		u, err := urlrule.Normalize(raw, nil, cfg.DropParams)
		if err != nil {
			return 0, fmt.Errorf("seed %q: %w", raw, err)
		}
		h, err := urlrule.HostKey(u)
		if err != nil {
			return 0, fmt.Errorf("seed %q: %w", raw, err)
		}
		keys = append(keys, seen.KeyOf(u))
		score := cfg.SeedScores[raw]
		level := priorityLevel(p.Priority(Item{URL: u, Host: h, Score: score}))
		// A host seeded with more URLs than it can be fetched soon gets
		// the rest at the lowest priority, so that its backlog does not sit
		// ahead of the other hosts of its shard.
		if perHost[h]++; perHost[h] > seedBurst {
			level = 0
		}
		us = append(us, shardURL{queue: topo.Shard(ShardOf(cfg.ClockKey(h))), host: h, m: urlMsg{URL: u, Score: score}, level: level})
	}
	queued, err := s.store.Queued(key, keys)
	if err != nil {
		return 0, err
	}
	var newKeys []seen.Key
	var newUs []shardURL
	for i := range us {
		if !queued[i] {
			newKeys = append(newKeys, keys[i])
			newUs = append(newUs, us[i])
		}
	}
	// Batched as links are, each level apart: a host seeded with
	// thousands of URLs ahead of another in its shard is taken a batch a
	// message, not one URL per prefetch slot (the other host waited for
	// thousands of park confirms one prefetch window at a time).
	if err := s.store.IndexURLs(key, indexed(newUs)); err != nil {
		return 0, err
	}
	if err := s.pub.publish(ctx, batchMessages(newUs, s.cfg.Batch)); err != nil {
		return 0, err
	}
	return len(newUs), s.store.MarkQueued(key, newKeys)
}

// Stats returns what this scheduler knows of a campaign, with RabbitMQ's
// count of its queued messages.
func (s *Server) Stats(id string) (session.Stats, error) {
	s.mu.Lock()
	a := s.campaigns[id]
	s.mu.Unlock()
	st := session.Stats{Campaign: id}
	if a != nil {
		st = a.stats()
	}
	st.Schedulers = []string{s.cfg.Name}
	if st.ConsumeError != "" {
		st.ConsumeError = s.cfg.Name + ": " + st.ConsumeError
	}
	conn, err := s.mq.get()
	if err != nil {
		return st, err
	}
	c, err := Topology{Campaign: id}.counts(conn)
	if err != nil {
		return st, err
	}
	st.Queued, st.DeadQueued, st.Consumers, st.Uncounted = c.queued, c.dead, c.consumers, c.uncounted
	return st, nil
}

// closeCampaign ends the campaign here: its sessions close, the outcomes
// being recorded finish, and its held deliveries go back to their queues.
// final: the campaign is over, and fetcher sessions for it are refused
// from now on (until it is seeded again). del: its queues and this
// scheduler's seen marks are removed too; callers delete only once every
// scheduler has closed the campaign (CloseEverywhere), so that none is
// still parking or publishing into queues that vanish under it.
func (s *Server) closeCampaign(id string, final, del bool) (session.Stats, error) {
	s.mu.Lock()
	a := s.campaigns[id]
	delete(s.campaigns, id)
	if a != nil {
		s.closing[a] = true
	}
	if final {
		s.m().forget(campaign.KeyID(id))
		// At once, under the lock that creates actors: a fetcher session
		// reconnecting while the campaign closes must not open it again.
		s.tombs[id] = time.Now()
	}
	s.mu.Unlock()
	var st session.Stats
	if a != nil {
		a.stop(30 * time.Second)
		st = a.stats()
		s.mu.Lock()
		delete(s.closing, a)
		s.mu.Unlock()
	}
	st.Campaign = id
	st.Schedulers = []string{s.cfg.Name}
	if del {
		// Idempotent: the first scheduler to get here deletes the queues.
		conn, err := s.mq.get()
		if err != nil {
			return st, err
		}
		if err := (Topology{Campaign: id}).Delete(conn); err != nil {
			return st, err
		}
		if err := s.store.Drop(id); err != nil {
			return st, err
		}
		s.log.Info("campaign closed and its queues deleted", "campaign", id)
	}
	return st, nil
}
