package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's top directory, seen from this package.
const repoRoot = ".."

// maxReadmeLines is the most lines README.md may have: it holds what a
// user needs first, and links to the rest.
const maxReadmeLines = 250

// link is one link found in a page.
type link struct {
	line   int
	target string
}

// page is a Markdown page of the manual: its links and the anchors its
// headings get.
type page struct {
	links   []link
	anchors map[string]bool
}

var (
	// inlineLink finds [text](target) and ![alt](target), with an
	// optional title after the target.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef is a link reference definition: [label]: target.
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// htmlRef is a link or image in raw HTML.
	htmlRef = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*["']([^"']*)["']`)
	// bareURL is text that GitHub turns into a link by itself (GFM's
	// autolink extension) or an <autolink>.
	bareURL = regexp.MustCompile(`(?i)(?:\bhttps?://|\bwww\.|\bmailto:|\bftp://)[^\s<>)]*`)
	// scheme is the start of an absolute URL.
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// heading is an ATX heading line.
	heading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// stripCode removes the inline code spans of a paragraph (which may span
// its lines): what is in them is text, never a link. A span's line breaks
// are kept, so that offsets still give line numbers.
func stripCode(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		run := s[i : i+n]
		rest := s[i+n:]
		j := strings.Index(rest, run)
		for j >= 0 && j+n < len(rest) && rest[j+n] == '`' { // a longer run does not close it
			k := j + n
			for k < len(rest) && rest[k] == '`' {
				k++
			}
			j = strings.Index(rest[k:], run)
			if j >= 0 {
				j += k
			}
		}
		if j < 0 { // no closing run: the backticks are text
			b.WriteString(run)
			s = rest
			continue
		}
		b.WriteString(" " + strings.Repeat("\n", strings.Count(rest[:j], "\n")))
		s = rest[j+n:]
	}
}

// slug is the anchor GitHub gives a heading: its text in lower case,
// without what is neither a letter (or its mark), a digit, a blank, '-'
// nor '_', blanks made '-'.
func slug(text string) string {
	text = inlineLink.ReplaceAllStringFunc(text, func(m string) string {
		return m[strings.IndexByte(m, '[')+1 : strings.Index(m, "](")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsMark(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// parsePage reads the links and heading anchors of a Markdown text. Fenced
// code blocks and HTML comments hold no links or headings.
func parsePage(text string) page {
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	lines := strings.Split(text, "\n")
	// Blank out fenced code blocks and HTML comments (which may span
	// lines), keeping the line numbers.
	var fence string // the open code fence, if any
	inComment := false
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			lines[i] = ""
			continue
		}
		if !inComment && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence, lines[i] = trimmed[:3], ""
			continue
		}
		var kept strings.Builder
		for line != "" {
			if inComment {
				j := strings.Index(line, "-->")
				if j < 0 {
					break
				}
				line, inComment = line[j+3:], false
				continue
			}
			j := strings.Index(line, "<!--")
			if j < 0 {
				kept.WriteString(line)
				break
			}
			kept.WriteString(line[:j])
			line, inComment = line[j+4:], true
		}
		lines[i] = kept.String()
	}
	// Headings, each a block of its own; the other blocks are paragraphs
	// (lines up to a blank one), where a code span may cross lines.
	var block []string
	first := 0 // the line number of block[0]
	flush := func() {
		text := stripCode(strings.Join(block, "\n"))
		lineAt := func(s string, off int) int { return first + strings.Count(s[:off], "\n") }
		for _, re := range []*regexp.Regexp{inlineLink, refDef, htmlRef} {
			for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
				p.links = append(p.links, link{lineAt(text, m[0]), text[m[2]:m[3]]})
			}
		}
		// A bare URL outside a link is a link too on GitHub. Links are
		// blanked first, keeping offsets.
		blank := func(m string) string { return strings.Map(mapBlank, m) }
		rest := inlineLink.ReplaceAllStringFunc(htmlRef.ReplaceAllStringFunc(text, blank), blank)
		for _, m := range bareURL.FindAllStringIndex(rest, -1) {
			p.links = append(p.links, link{lineAt(rest, m[0]), rest[m[0]:m[1]]})
		}
		block = nil
	}
	for i, line := range lines {
		if m := heading.FindStringSubmatch(line); m != nil {
			flush()
			s := slug(strings.ReplaceAll(m[2], "`", ""))
			if k := seen[s]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
			block, first = []string{line}, i+1
			flush()
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if len(block) == 0 {
			first = i + 1
		}
		block = append(block, line)
	}
	flush()
	return p
}

// mapBlank keeps line breaks and makes every other character a blank.
func mapBlank(r rune) rune {
	if r == '\n' {
		return r
	}
	return ' '
}

// manual returns the pages of the manual, by path relative to the
// repository's top.
func manual(t *testing.T) map[string]page {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(repoRoot, "README.md"))
	pages := map[string]page{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		pages[filepath.ToSlash(rel)] = parsePage(string(b))
	}
	return pages
}

// resolve returns the repository-relative path a link of the page from
// points to and its fragment, or an error when it leaves the repository.
func resolve(from, target string) (path, frag string, err error) {
	path, frag, _ = strings.Cut(target, "#")
	switch {
	case target == "":
		return "", "", fmt.Errorf("empty link")
	case scheme.MatchString(target) || strings.HasPrefix(strings.ToLower(target), "www."):
		return "", "", fmt.Errorf("an absolute URL: the manual links only to files of the repository")
	case strings.HasPrefix(path, "/"), strings.HasPrefix(path, `\`):
		return "", "", fmt.Errorf("an absolute path: links are relative to the page")
	case path == "":
		return from, frag, nil
	}
	path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), filepath.FromSlash(path))))
	if path == ".." || strings.HasPrefix(path, "../") {
		return "", "", fmt.Errorf("outside the repository")
	}
	return path, frag, nil
}

// TestManualLinks checks every link of README.md and docs/*.md: relative,
// inside the repository, to a file that exists, and to a heading of the
// page when it names one.
func TestManualLinks(t *testing.T) {
	pages := manual(t)
	if _, ok := pages["README.md"]; !ok {
		t.Fatal("no README.md")
	}
	for name, p := range pages {
		for _, l := range p.links {
			path, frag, err := resolve(name, l.target)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", name, l.line, l.target, err)
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(path))); err != nil {
				t.Errorf("%s:%d: link %q: no file %s in the repository", name, l.line, l.target, path)
				continue
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			target, ok := pages[path]
			if !ok {
				b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(path)))
				if err != nil {
					t.Fatal(err)
				}
				target = parsePage(string(b))
			}
			if !target.anchors[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", name, l.line, l.target, path, frag)
			}
		}
	}
}

// TestManualReachable checks that every page of docs/ can be found from
// the README by following links.
func TestManualReachable(t *testing.T) {
	pages := manual(t)
	seen := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, l := range pages[name].links {
			path, _, err := resolve(name, l.target)
			if err == nil && !seen[path] {
				if _, ok := pages[path]; ok {
					seen[path] = true
					queue = append(queue, path)
				}
			}
		}
	}
	var lost []string
	for name := range pages {
		if !seen[name] {
			lost = append(lost, name)
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 {
		t.Errorf("no link from README.md leads to %s", strings.Join(lost, ", "))
	}
}

// TestReadmeLength keeps the README to what a user needs first.
func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= maxReadmeLines {
		t.Errorf("README.md has %d lines, want under %d: move the detail to a page of docs/ and link it", n, maxReadmeLines)
	}
}
