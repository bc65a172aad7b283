package cli

import (
	"fmt"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

// workflowInput wraps a config into the Campaign workflow's one input.
func workflowInput(cfg campaign.Config) any {
	return workflows.CampaignInput{Config: cfg}
}

// scaleText says what a scale did.
func scaleText(res workflows.ScaleResult, asked int) string {
	return fmt.Sprintf("fetchers %d -> %d", res.Previous, res.Fetchers)
}
