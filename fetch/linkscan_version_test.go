package fetch

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linkScanNetVersion is the golang.org/x/net whose html.Tokenizer the link
// scanner (linkscan.go, linkscan_raw.go) reproduces, function by function.
const linkScanNetVersion = "v0.59.0"

// TestLinkScanPinsNetVersion fails when the module moves to another
// golang.org/x/net than the one the link scanner was written against: the
// scanner decides which tags the tokenizer would find without running it,
// so a change to the tokenizer's states would make it find other tags,
// silently. It also holds linkscan.go's comment to the same version.
func TestLinkScanPinsNetVersion(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	// The version the build selects, after any replace directive.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}{{with .Replace}} {{.Version}}{{end}}", "golang.org/x/net").CombinedOutput()
	require.NoError(t, err, "go list -m golang.org/x/net: %s", out)
	f := strings.Fields(string(out))
	got := f[len(f)-1]
	assert.Equalf(t, linkScanNetVersion, got, `golang.org/x/net is %q, but the link scanner mirrors the html.Tokenizer of %s. Before moving:
  1. diff html/token.go from %s to %s: each function of fetch/linkscan.go and fetch/linkscan_raw.go
     names the Tokenizer function it mirrors (readTag, readStartTag, readRawOrRCDATA, readScript,
     readComment, readMarkupDeclaration, readUntilCloseAngle, ...); port every change to where a
     token ends or which contexts hide tags;
  2. re-fuzz the scanner against the new tokenizer, for some minutes:
     go test ./fetch -run '^$' -fuzz '^FuzzLinkTagsMatchReference$' -fuzztime 10m
     and run TestLinkTagsLargePageMatchesReference and TestLinkTagsAgreeWithGoquery;
  3. set linkScanNetVersion and the version named in fetch/linkscan.go's comment to %s`,
		got, linkScanNetVersion, linkScanNetVersion, got, got)
	src, err := os.ReadFile("linkscan.go")
	require.NoError(t, err)
	want := "golang.org/x/net/html's Tokenizer (" + linkScanNetVersion + ")"
	assert.Truef(t, strings.Contains(string(src), want), "fetch/linkscan.go does not say %q: its comment and linkScanNetVersion name different versions", want)
}
