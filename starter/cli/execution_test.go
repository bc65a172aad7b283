package cli

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/workflows"
)

// A search attribute that does not decode is said, not shown as an empty
// state or 0 pages.
func TestExecutionSearchAttributes(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	payload := func(v any) *commonpb.Payload {
		p, err := dc.ToPayload(v)
		require.NoError(t, err)
		return p
	}
	info := func(state, pages any) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.SearchAttributeState: payload(state), workflows.SearchAttributePages: payload(pages),
		}}}
	}
	ex := execution(info("running", 42))
	assert.Equal(t, "running", ex.State)
	assert.Equal(t, int64(42), ex.PagesFetched)
	assert.Empty(t, ex.DecodeError)
	ex = execution(info(7, "many"))
	for _, name := range []string{workflows.SearchAttributeState, workflows.SearchAttributePages} {
		assert.Contains(t, ex.DecodeError, name+": ", "the decode error names the attribute")
	}
}
