package cli

import (
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/drover-crawl/drover/workflows"
)

// A search attribute that does not decode is said, not shown as an empty
// state or 0 pages.
func TestExecutionSearchAttributes(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	payload := func(v any) *commonpb.Payload {
		p, err := dc.ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	info := func(state, pages any) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.SearchAttributeState: payload(state), workflows.SearchAttributePages: payload(pages),
		}}}
	}
	ex := execution(info("running", 42))
	if ex.State != "running" || ex.PagesFetched != 42 || ex.DecodeError != "" {
		t.Errorf("decoded %q, %d, error %q", ex.State, ex.PagesFetched, ex.DecodeError)
	}
	ex = execution(info(7, "many"))
	for _, name := range []string{workflows.SearchAttributeState, workflows.SearchAttributePages} {
		if !strings.Contains(ex.DecodeError, name+": ") {
			t.Errorf("decode error %q does not name %s", ex.DecodeError, name)
		}
	}
}
