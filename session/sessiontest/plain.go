package sessiontest

import (
	"context"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/session"
)

// The calls over every scheduler, in the shape the starter's App takes
// them (the token an argument), over plaintext: what tests on loopback
// give an App where the starter's main gives its TLS-aware client.

// CampaignStats is session.Client.CampaignStats with token.
func CampaignStats(ctx context.Context, addrs []string, token, id string) (session.Stats, error) {
	return session.Client{Token: token}.CampaignStats(ctx, addrs, id)
}

// Failures is session.Client.Failures with token.
func Failures(ctx context.Context, addrs []string, token, id, reason string) ([]failure.Record, int, error) {
	return session.Client{Token: token}.Failures(ctx, addrs, id, reason)
}

// DropFailures is session.Client.DropFailures with token.
func DropFailures(ctx context.Context, addrs []string, token, id string) error {
	return session.Client{Token: token}.DropFailures(ctx, addrs, id)
}

// ReleaseCampaign is session.Client.ReleaseCampaign with token.
func ReleaseCampaign(ctx context.Context, addrs []string, token, id string) error {
	return session.Client{Token: token}.ReleaseCampaign(ctx, addrs, id)
}
