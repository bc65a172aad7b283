package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxReadmeLines is the most README.md may hold: a first page (what drover
// is, the two commands, the pieces, a first crawl, where to read on); the
// manuals are in docs/.
const maxReadmeLines = 200

// linkedDocs are the markdown files whose relative links must resolve.
// docs/*.md is added to them.
var linkedDocs = []string{"README.md", "NOTES.md", "bench/README.md"}

// outsideFiles are citations of files the repository does not hold, which
// no file of it may make: a reader cannot follow them. Built from parts,
// so that this file does not cite them itself.
var outsideFiles = []string{"DESIGN" + ".md", "STYLE" + ".md", ".." + "/shared"}

// TestDocsHoldTogether keeps the documentation a newcomer walks into
// whole: README.md stays a short first page that links every page of
// docs/, every relative link of the markdown files points to a file that
// exists (and, with an anchor, to a heading of that file), and no file
// cites one the repository does not hold.
func TestDocsHoldTogether(t *testing.T) {
	root := moduleRoot(t)
	t.Run("readme-short", func(t *testing.T) {
		n := len(readLines(t, filepath.Join(root, "README.md")))
		assert.Lessf(t, n, maxReadmeLines, "README.md has %d lines, want fewer than %d: move the detail to a page of docs/ and link it", n, maxReadmeLines)
	})
	t.Run("readme-links-docs", func(t *testing.T) { checkReadmeLinksDocs(t, root) })
	t.Run("links-resolve", func(t *testing.T) { checkLinksResolve(t, root) })
	t.Run("no-outside-citations", func(t *testing.T) { checkNoOutsideCitations(t, root) })
}

// checkReadmeLinksDocs: every file under docs/ is the target of a link of
// README.md.
func checkReadmeLinksDocs(t *testing.T, root string) {
	linked := map[string]bool{}
	for _, l := range mdLinks(t, root, "README.md") {
		linked[l.target] = true
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		assert.Truef(t, linked[rel], "README.md does not link %s; add it to \"Where to read on\"", rel)
		return nil
	})
	require.NoError(t, err)
}

// checkLinksResolve: every relative link of linkedDocs and docs/*.md names
// a file that exists, and its anchor, if any, a heading of that file.
func checkLinksResolve(t *testing.T, root string) {
	files := slices.Clone(linkedDocs)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
	}
	anchors := map[string]map[string]bool{} // file -> its headings' slugs
	for _, f := range files {
		for _, l := range mdLinks(t, root, f) {
			info, err := os.Stat(filepath.Join(root, l.target))
			if !assert.NoErrorf(t, err, "%s:%d: link to %s: no such file", f, l.line, l.raw) {
				continue
			}
			if l.anchor == "" {
				continue
			}
			if !assert.Falsef(t, info.IsDir() || !strings.HasSuffix(l.target, ".md"), "%s:%d: link to %s: an anchor needs a markdown file", f, l.line, l.raw) {
				continue
			}
			if anchors[l.target] == nil {
				anchors[l.target] = headingSlugs(t, filepath.Join(root, l.target))
			}
			assert.Truef(t, anchors[l.target][l.anchor], "%s:%d: link to %s: %s has no heading #%s", f, l.line, l.raw, l.target, l.anchor)
		}
	}
}

// citationFile reports whether a file is one whose citations are checked:
// Go, markdown, YAML, the Makefile and the CI script.
func citationFile(rel string) bool {
	switch filepath.Ext(rel) {
	case ".go", ".md", ".yml", ".yaml":
		return true
	}
	return filepath.Base(rel) == "Makefile" || rel == ".ci/run"
}

// checkNoOutsideCitations: no file citationFile picks names one of
// outsideFiles.
func checkNoOutsideCitations(t *testing.T, root string) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") && rel != ".ci" || name == "node_modules" || rel == "bin" || rel == "out" || rel == "data" || rel == "bench/out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !citationFile(rel) {
			return nil
		}
		for i, line := range readLines(t, path) {
			for _, c := range outsideFiles {
				if strings.Contains(line, c) {
					assert.Failf(t, "cites a file the repository does not hold", "%s:%d cites %s, which the repository does not hold: cite a file it holds, or say it in place", rel, i+1, c)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// mdLink is a relative link of a markdown file.
type mdLink struct {
	line   int
	raw    string // as written
	target string // the file it names, relative to the root, slash-separated
	anchor string // after '#', or ""
}

// linkRE finds inline links and images: ](target) or ](target "title").
var linkRE = regexp.MustCompile(`\]\(([^()\s]*)(?:\s+"[^"]*")?\)`)

// mdLinks returns the relative links of file (relative to root), fenced
// code blocks and inline code left out. A link to an anchor of the file
// itself targets the file.
func mdLinks(t *testing.T, root, file string) []mdLink {
	t.Helper()
	var links []mdLink
	dir := filepath.Dir(file)
	for i, line := range blankCode(readLines(t, filepath.Join(root, file)), true) {
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			raw := m[1]
			if raw == "" || isAbsoluteURL(raw) {
				continue
			}
			path, anchor, _ := strings.Cut(raw, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			target := file
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(dir, path)))
			}
			links = append(links, mdLink{line: i + 1, raw: raw, target: target, anchor: anchor})
		}
	}
	return links
}

func isAbsoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != ""
}

// blankCode returns lines with fenced code blocks blanked, keeping the
// line numbers: a '#' or a "](" in a code block is neither a heading nor
// a link. With inline, code spans are blanked too (a link's text keeps its
// brackets); without, they stay (they are part of a heading's text).
func blankCode(lines []string, inline bool) []string {
	out := make([]string, len(lines))
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if inline {
			line = inlineCode.ReplaceAllString(line, "``")
		}
		out[i] = line
	}
	return out
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// headingSlugs returns the anchors GitHub gives the headings of a markdown
// file (a repeated heading's second anchor gets -1, its third -2, ...).
func headingSlugs(t *testing.T, path string) map[string]bool {
	t.Helper()
	slugs := map[string]bool{}
	seen := map[string]int{}
	for _, line := range blankCode(readLines(t, path), false) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			slugs[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	}
	return slugs
}

var headingRE = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t#]*$`)

// mdLinkText turns [text](target) into text, as the rendered heading reads.
var mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading: its text in lower case, without
// the characters that are not letters, marks, digits, '_', '-' or spaces,
// spaces turned into '-'.
func slug(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoErrorf(t, sc.Err(), "%s", path)
	return lines
}
