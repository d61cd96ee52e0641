package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, from this package's folder.
const repoRoot = "../.."

// docFiles returns README.md and every docs/*.md, relative to repoRoot.
func docFiles(t *testing.T) []string {
	t.Helper()
	md, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, m := range md {
		rel, err := filepath.Rel(repoRoot, m)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// readDoc returns the text of a file of the repository.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(name)))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}

// textLine is a line of a Markdown document outside its fenced code
// blocks.
type textLine struct {
	n    int // 1-based
	text string
}

// block is a fenced code block: its info string and its lines.
type block struct {
	info  string // "sh", "console", "" ...
	start int    // the line of the opening fence, 1-based
	lines []textLine
}

// splitMarkdown separates a document's text lines from its fenced code
// blocks (``` or ~~~ fences).
func splitMarkdown(doc string) (text []textLine, blocks []block) {
	var cur *block
	fence := ""
	for i, l := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				cur = &block{info: strings.TrimSpace(trimmed[len(f):]), start: i + 1}
				continue
			}
			text = append(text, textLine{i + 1, l})
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "" {
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		cur.lines = append(cur.lines, textLine{i + 1, l})
	}
	return text, blocks
}

// fenceOf returns the fence a line opens (``` or ~~~, or longer), or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

var (
	// codeSpan is an inline code span: `...`.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// mdLink is a link or image: [text](target) or [text](target "title").
	mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// linkText keeps a link's text: [text](target) -> text.
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the anchors GitHub gives a document's headings.
func anchors(doc string) map[string]bool {
	text, _ := splitMarkdown(doc)
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range text {
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		slug := slugOf(m[2])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugOf returns GitHub's anchor of a heading's text: lower case, letters,
// digits, '-' and '_' kept, spaces as '-', everything else dropped.
func slugOf(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestLinks checks that every relative link of README.md and docs/*.md
// names a file or folder of the repository, and that an anchor names a
// heading of its document.
func TestLinks(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range docFiles(t) {
		doc := readDoc(t, name)
		text, _ := splitMarkdown(doc)
		for _, l := range text {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if err := checkLink(root, name, target); err != nil {
					t.Errorf("%s:%d: link %s: %v", name, l.n, target, err)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: is the parser broken?")
	}
}

// checkLink resolves target, a link of the document name (relative to
// root), and checks its anchor.
func checkLink(root, name, target string) error {
	path, anchor, _ := strings.Cut(target, "#")
	file := filepath.Join(root, filepath.FromSlash(name))
	if path != "" {
		file = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if rel, err := filepath.Rel(root, file); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("points outside the repository")
		}
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no such file: %w", err)
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("an anchor into a file that is not Markdown")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !anchors(string(b))[anchor] {
		return fmt.Errorf("no heading with the anchor #%s", anchor)
	}
	return nil
}

// TestSlugOf pins the anchors of a few headings the documents link to.
func TestSlugOf(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Running a deployment", "running-a-deployment"},
		{"Clusters, failover and Redis Sentinel", "clusters-failover-and-redis-sentinel"},
		{"The HTTP API and the dashboard", "the-http-api-and-the-dashboard"},
		{"docker compose", "docker-compose"},
		{"`sudoku serve`: the [API](x.md)", "sudoku-serve-the-api"},
	} {
		if got := slugOf(c.heading); got != c.want {
			t.Errorf("slugOf(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// TestCheckLink shows that a link to a missing file or heading, or out of
// the repository, is caught.
func TestCheckLink(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		doc, target string
		ok          bool
	}{
		{"README.md", "docs/protocol.md", true},
		{"README.md", "examples/node", true},
		{"README.md", "docs/nothing.md", false},
		{"README.md", "../shared/STYLE.md", false},
		{"docs/deployment.md", "../README.md#running-a-deployment", true},
		{"docs/deployment.md", "../README.md#no-such-section", false},
		{"docs/testing.md", "#fuzzing", true},
		{"docs/testing.md", "#fuzz", false},
		{"README.md", "go.mod#x", false},
	} {
		if err := checkLink(root, c.doc, c.target); (err == nil) != c.ok {
			t.Errorf("%s: link %s: %v, want ok=%v", c.doc, c.target, err, c.ok)
		}
	}
}
