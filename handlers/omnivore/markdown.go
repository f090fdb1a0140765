package omnivore

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	nethtml "golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Content formats of Omnivore's search and /api/content
// (packages/api/src/jobs/upload_content.ts, omnivore-app/omnivore@322ce62).
const (
	FormatHTML                = "html"
	FormatMarkdown            = "markdown"
	FormatHighlightedMarkdown = "highlightedMarkdown"
)

// ValidFormat reports whether f is one of the content formats.
func ValidFormat(f string) bool {
	return f == FormatHTML || f == FormatMarkdown || f == FormatHighlightedMarkdown
}

// ErrPending is Render's answer for an item whose page is
// still being fetched: the content is not there yet.
var ErrPending = errors.New("the item's content is being fetched")

// Render returns the member's item's content in format (one of
// ValidFormat's), without its tracking pixels (the plugins write it into
// notes that render it) and with its stored images at their addresses on
// the site (images): nil when the item has none, ErrPending while its page
// is being fetched.
func Render(ctx context.Context, store *storage.Store, images export.ImageLinks, memberID, itemID, format string) (*string, error) {
	lib := library.Of(store)
	pending, err := lib.HasPendingPageFetch(ctx, memberID, itemID)
	if err != nil {
		return nil, err
	}
	if pending {
		return nil, ErrPending
	}
	c, err := lib.ItemContent(ctx, memberID, itemID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files, err := images.Files(ctx, store, memberID, itemID, c.HTML)
	if err != nil {
		return nil, err
	}
	base := ""
	if len(files) > 0 {
		// The images' addresses are read against the item's, as they
		// were when they were stored.
		it, err := lib.SavedItem(ctx, memberID, itemID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		base = it.OriginalURL
	}
	var out string
	switch format {
	case FormatMarkdown:
		out = htmlToMarkdown(c.HTML, nil, files, base)
	case FormatHighlightedMarkdown:
		hs, err := lib.ItemHighlights(ctx, memberID, itemID)
		if err != nil {
			return nil, err
		}
		out = htmlToMarkdown(c.HTML, hs, files, base)
	default:
		out = articles.RewriteImages(c.HTML, base, files)
	}
	return &out, nil
}

// htmlToMarkdown writes HTML as Markdown, with the highlights' text
// between == marks, as Omnivore's htmlToHighlightedMarkdown does
// (packages/api/src/utils/parser.ts, omnivore-app/omnivore@322ce62: each
// highlighted stretch of a text node becomes ==text==, spaces outside the
// marks; a link holding a highlight becomes ==[text](href)==). Hearth
// finds a highlight by its text (with the text around it when that is
// unique) in the content's text, where Omnivore applies its stored patch.
func htmlToMarkdown(src string, highlights []*library.Highlight, files map[string]string, base string) string {
	doc, err := nethtml.Parse(strings.NewReader(src))
	if err != nil {
		return ""
	}
	m := &mdWriter{files: files, base: base}
	if len(highlights) > 0 {
		m.marks = markHighlights(doc, highlights)
	}
	m.node(doc)
	return strings.TrimSpace(m.b.String()) + "\n"
}

// textNodes lists doc's text nodes in order, skipping what is not shown.
func textNodes(n *nethtml.Node, out []*nethtml.Node) []*nethtml.Node {
	if n.Type == nethtml.ElementNode && hiddenElement(n.DataAtom) {
		return out
	}
	if n.Type == nethtml.TextNode {
		return append(out, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		out = textNodes(c, out)
	}
	return out
}

func hiddenElement(a atom.Atom) bool {
	return a == atom.Script || a == atom.Style || a == atom.Noscript || a == atom.Template || a == atom.Head
}

// span is a highlighted stretch [from, to) of one text node's Data.
type span struct{ from, to int }

// markBudget bounds the bytes of an item's text that markHighlights
// searches for its highlights, and of the highlights' own texts it reads:
// each segment is looked for in the whole text
// (with its context, then alone), and an item may have thousands of
// highlights (an import joins up to 5,000 rows of one document into an
// entry, and adds entry after entry to one item) over megabytes of text.
// Past it the item's remaining highlights are left unmarked, as a
// highlight whose text is not found is. Each highlight searches the text
// once or twice: 256 MiB marks 64 to 128 highlights of a book of 2 MiB,
// thousands of an article of 50 KB.
const markBudget = 256 << 20

// markHighlights finds each highlight's segments in doc's text and returns
// the highlighted stretches of each text node, searching at most
// markBudget bytes of the text.
func markHighlights(doc *nethtml.Node, hs []*library.Highlight) map[*nethtml.Node][]span {
	nodes := textNodes(doc, nil)
	// The text with whitespace runs as one space, and for each of its
	// bytes its offset in the node it comes from (at), the nodes' texts
	// starting at runs' starts: four bytes a byte of the text, allocated
	// once (a pointer and an int a byte, grown by append, came to some 80
	// times the text).
	size := 0
	for _, n := range nodes {
		size += len(n.Data)
	}
	text := make([]byte, 0, size)
	at := make([]int32, 0, size)
	type run struct {
		start int // in text
		node  *nethtml.Node
	}
	runs := make([]run, 0, len(nodes))
	space := true
	for _, n := range nodes {
		runs = append(runs, run{len(text), n})
		for i := 0; i < len(n.Data); i++ {
			c := n.Data[i]
			if isSpace(c) {
				if space {
					continue
				}
				c, space = ' ', true
			} else {
				space = false
			}
			text = append(text, c)
			at = append(at, int32(i))
		}
	}
	marks := map[*nethtml.Node][]span{}
	s := string(text)
	budget := markBudget
highlights:
	for _, h := range hs {
		from := 0
		for _, sg := range h.Segments {
			if budget <= 0 {
				break highlights
			}
			budget -= len(sg.BeforeText) + len(sg.Text) + len(sg.AfterText)
			needle := collapseSpace(sg.Text)
			if needle == "" {
				continue
			}
			i := -1
			// The text with its context first, when that is unique.
			if ctx := collapseSpace(sg.BeforeText + sg.Text + sg.AfterText); ctx != needle {
				budget -= len(s) // the first occurrence, then any other
				if j := strings.Index(s, ctx); j >= 0 && !strings.Contains(s[j+1:], ctx) {
					if k := strings.Index(ctx, needle); k >= 0 {
						i = j + k
					}
				}
			}
			if i < 0 {
				budget -= len(s) - from
				if j := strings.Index(s[from:], needle); j >= 0 {
					i = from + j
				}
			}
			if i < 0 {
				continue
			}
			from = i + len(needle)
			// The last run starting at or before i (runs of nodes whose
			// text is all collapsed white space start where the next does).
			r := sort.Search(len(runs), func(x int) bool { return runs[x].start > i }) - 1
			for k := i; k < from; k++ {
				for r+1 < len(runs) && runs[r+1].start <= k {
					r++
				}
				node, o := runs[r].node, int(at[k])
				sp := marks[node]
				if n := len(sp); n > 0 && sp[n-1].to >= o {
					sp[n-1].to = max(sp[n-1].to, o+1)
				} else {
					sp = append(sp, span{o, o + 1})
				}
				marks[node] = sp
			}
		}
	}
	for n, sp := range marks {
		sort.Slice(sp, func(i, j int) bool { return sp[i].from < sp[j].from })
		marks[n] = sp
	}
	return marks
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// mdWriter writes Markdown; text is collapsed as a browser shows it.
type mdWriter struct {
	b      strings.Builder
	marks  map[*nethtml.Node][]span
	space  bool   // the last byte written is a space or a line break
	prefix string // written after each line break (quotes, list items)
	pre    int    // inside pre
	// files maps the addresses of the item's stored images, as
	// library.ImageSource reads them against base, to theirs on the site
	// (as articles.RewriteImages maps them).
	files map[string]string
	base  string
}

func (m *mdWriter) write(s string) {
	if s == "" {
		return
	}
	m.b.WriteString(s)
	last := s[len(s)-1]
	m.space = last == ' ' || last == '\n'
}

// block ends the current paragraph with a blank line.
func (m *mdWriter) block() {
	out := m.b.String()
	if out == "" {
		return
	}
	trimmed := strings.TrimRight(out, " ")
	if len(trimmed) != len(out) {
		m.b.Reset()
		m.b.WriteString(trimmed)
	}
	switch {
	case strings.HasSuffix(trimmed, "\n\n"):
	case strings.HasSuffix(trimmed, "\n"):
		m.b.WriteString(strings.TrimRight(m.prefix, " ") + "\n")
	default:
		m.b.WriteString("\n" + strings.TrimRight(m.prefix, " ") + "\n")
	}
	m.b.WriteString(m.prefix)
	m.space = true
}

// text writes a text node's words, its highlighted stretches between ==.
func (m *mdWriter) text(n *nethtml.Node) {
	if m.pre > 0 {
		m.write(n.Data)
		return
	}
	data := n.Data
	pos := 0
	for _, sp := range m.marks[n] {
		m.plain(data[pos:sp.from])
		inner := data[sp.from:sp.to]
		if lead := strings.TrimLeft(inner, " \t\r\n\f"); len(lead) < len(inner) && !m.space {
			m.write(" ")
		}
		if words := collapseSpace(inner); words != "" {
			m.write("==" + words + "==")
		}
		if strings.TrimRight(inner, " \t\r\n\f") != inner {
			m.write(" ")
		}
		pos = sp.to
	}
	m.plain(data[pos:])
}

func (m *mdWriter) plain(s string) {
	if s == "" {
		return
	}
	words := strings.Fields(s)
	if isSpace(s[0]) && !m.space {
		m.write(" ")
	}
	m.write(strings.Join(words, " "))
	if len(words) > 0 && isSpace(s[len(s)-1]) {
		m.write(" ")
	}
}

func (m *mdWriter) children(n *nethtml.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		m.node(c)
	}
}

// hasMark reports whether a highlighted stretch lies inside n.
func (m *mdWriter) hasMark(n *nethtml.Node) bool {
	if len(m.marks[n]) > 0 {
		return true
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if m.hasMark(c) {
			return true
		}
	}
	return false
}

func (m *mdWriter) node(n *nethtml.Node) {
	switch n.Type {
	case nethtml.TextNode:
		m.text(n)
		return
	case nethtml.DocumentNode:
		m.children(n)
		return
	case nethtml.ElementNode:
	default:
		return
	}
	if hiddenElement(n.DataAtom) {
		return
	}
	switch n.DataAtom {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		m.block()
		m.write(strings.Repeat("#", int(n.Data[1]-'0')) + " ")
		m.children(n)
		m.block()
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Main, atom.Aside,
		atom.Figure, atom.Figcaption, atom.Table, atom.Tr, atom.Dl, atom.Dt, atom.Dd, atom.Details, atom.Summary:
		m.block()
		m.children(n)
		m.block()
	case atom.Br:
		m.write("  \n" + m.prefix)
	case atom.Hr:
		m.block()
		m.write("---")
		m.block()
	case atom.Strong, atom.B:
		m.wrap(n, "**")
	case atom.Em, atom.I:
		m.wrap(n, "_")
	case atom.Del, atom.S, atom.Strike:
		m.wrap(n, "~~")
	case atom.Code:
		if m.pre > 0 {
			m.children(n)
			return
		}
		m.wrap(n, "`")
	case atom.Pre:
		m.block()
		m.write("```\n" + m.prefix)
		m.pre++
		m.children(n)
		m.pre--
		if !strings.HasSuffix(m.b.String(), "\n") {
			m.write("\n" + m.prefix)
		}
		m.write("```")
		m.block()
	case atom.Blockquote:
		m.block()
		saved := m.prefix
		m.prefix += "> "
		m.write("> ")
		m.children(n)
		m.prefix = saved
		m.block()
	case atom.Ul, atom.Ol:
		m.block()
		saved := m.prefix
		num := 0
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != nethtml.ElementNode || c.DataAtom != atom.Li {
				continue
			}
			num++
			bullet := "* "
			if n.DataAtom == atom.Ol {
				bullet = strconv.Itoa(num) + ". "
			}
			if num > 1 {
				m.write("\n" + saved)
			}
			m.write(bullet)
			m.prefix = saved + strings.Repeat(" ", len(bullet))
			m.children(c)
			m.prefix = saved
		}
		m.block()
	case atom.A:
		href := articles.Attr(n, "href")
		if href == "" {
			m.children(n)
			return
		}
		mark := ""
		if m.hasMark(n) {
			mark = "=="
		}
		if collapseSpace(textOf(n)) == href {
			m.write(mark + "<" + href + ">" + mark)
			return
		}
		// Inside the link the highlight marks are the link's.
		marks := m.marks
		m.marks = nil
		m.write(mark + "[")
		m.children(n)
		m.marks = marks
		m.write("](" + escapeLinkURL(href) + ")" + mark)
	case atom.Img:
		// A tracking pixel is left out, as the reader leaves it out.
		if library.TrackingPixel(articles.Attr(n, "width"), articles.Attr(n, "height")) {
			break
		}
		src := articles.Attr(n, "src")
		if len(m.files) > 0 {
			if to, ok := m.files[library.ImageSource(src, articles.Attr(n, "srcset"), m.base)]; ok {
				src = to
			}
		}
		if src != "" {
			m.write("![" + collapseSpace(articles.Attr(n, "alt")) + "](" + escapeLinkURL(src) + ")")
		}
	case atom.Td, atom.Th:
		m.children(n)
		m.write(" ")
	default:
		m.children(n)
	}
}

// wrap writes n's content between delimiters, outside its spaces.
func (m *mdWriter) wrap(n *nethtml.Node, d string) {
	if strings.TrimSpace(textOf(n)) == "" {
		m.children(n)
		return
	}
	m.write(d)
	m.children(n)
	out := m.b.String()
	if t := strings.TrimRight(out, " "); len(t) != len(out) {
		m.b.Reset()
		m.b.WriteString(t)
		m.write(d + " ")
		return
	}
	m.write(d)
}

func textOf(n *nethtml.Node) string {
	var b strings.Builder
	for _, t := range textNodes(n, nil) {
		b.WriteString(t.Data)
	}
	return b.String()
}

// escapeLinkURL escapes what would end a Markdown link target, as
// Omnivore's a translator does.
func escapeLinkURL(u string) string {
	return strings.NewReplacer("(", "%28", ")", "%29", " ", "%20").Replace(u)
}
