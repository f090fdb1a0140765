package importer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Placing an export's quotes (highlights it keeps as text alone) in the
// item's content, as the highlights clients make.

// placeBudget bounds the text placeQuote looks at for one item's quotes
// (each walk reads the content's text again): past it the item's remaining
// quotes stay at the root, so an entry of many quotes over a long content
// costs bounded CPU.
const placeBudget = 64 << 20

// placeQuote locates quote in content as highlight segments: the deepest
// element whose text holds it, by an XPath from the content's root
// ("/div[1]/p[2]") and rune offsets in that element's text, as the
// highlights clients make; a quote that runs over several elements, one
// segment per element (placeAcross). A quote not found (the export's
// content differs or is missing) is kept at the root ("/", offsets 0),
// with its text.
func (ct *contentText) placeQuote(quote string, budget *int) []library.HighlightSegment {
	seg := library.HighlightSegment{XPath: "/", Text: clipString(quote, library.MaxSegmentText-1)}
	body := ct.body
	if body == nil || quote == "" || *budget <= 0 {
		return []library.HighlightSegment{seg}
	}
	var best string
	var bestStart int
	var walk func(n *html.Node, path string)
	walk = func(n *html.Node, path string) {
		counts := map[string]int{}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			counts[c.Data]++
			if *budget <= 0 {
				return // the element found so far holds the quote too
			}
			text := ct.of(c)
			*budget -= len(text)
			if i := strings.Index(text, quote); i >= 0 {
				p := fmt.Sprintf("%s/%s[%d]", path, c.Data, counts[c.Data])
				best, bestStart = p, utf8.RuneCountInString(text[:i])
				walk(c, p)
				return
			}
		}
	}
	walk(body, "")
	if best == "" {
		if segs := placeAcross(body, quote, budget); segs != nil {
			return segs
		}
		return []library.HighlightSegment{seg}
	}
	seg.XPath, seg.StartOffset, seg.EndOffset = best, bestStart, bestStart+len([]rune(quote))
	return []library.HighlightSegment{seg}
}

// textRun is a text node of the content: its element's path (as
// placeQuote's; "/" for the body's own text), where the node's text starts
// in its element's text (runes), and the text; or, with brk, the boundary of
// a block element (between paragraphs, list items...), which reads as
// white space.
type textRun struct {
	path string
	at   int
	text string
	brk  bool
}

// blockElements are the elements whose boundaries separate words.
var blockElements = map[string]bool{
	"address": true, "article": true, "aside": true, "blockquote": true, "br": true, "dd": true, "div": true,
	"dl": true, "dt": true, "figcaption": true, "figure": true, "footer": true, "h1": true, "h2": true, "h3": true,
	"h4": true, "h5": true, "h6": true, "header": true, "hr": true, "li": true, "main": true, "ol": true, "p": true,
	"pre": true, "section": true, "table": true, "td": true, "th": true, "tr": true, "ul": true,
}

// placeAcross locates a quote no single element holds, one that runs over
// several paragraphs: Omnivore writes a highlight of two paragraphs as
// "first\n\nsecond" while the content has <p>first</p><p>second</p>. The
// content's text is compared with each run of white space (block
// boundaries included) taken as one space, and the quote becomes one
// segment per text node it covers, at that node's element with offsets in
// the element's text, as Inboxt's web app records a selection across
// elements (one segment per text node: getSafeTextRanges and
// wrapSafeRangeWithSpan in apps/web/src/utils/highlightsDOM.ts,
// Inboxt/inboxt@45f4314). Nil when the quote is not there, or would take
// more than library.MaxSegments segments.
func placeAcross(body *html.Node, quote string, budget *int) []library.HighlightSegment {
	var runs []textRun
	var collect func(n *html.Node, path string) int
	collect = func(n *html.Node, path string) int {
		counts := map[string]int{}
		at := 0
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				runs = append(runs, textRun{path: path, at: at, text: c.Data})
				at += utf8.RuneCountInString(c.Data)
				*budget -= len(c.Data)
			case html.ElementNode:
				counts[c.Data]++
				p := fmt.Sprintf("%s/%s[%d]", path, c.Data, counts[c.Data])
				if blockElements[c.Data] {
					runs = append(runs, textRun{brk: true})
				}
				at += collect(c, p)
				if blockElements[c.Data] {
					runs = append(runs, textRun{brk: true})
				}
			}
		}
		return at
	}
	collect(body, "")
	q := collapseSpace([]textRun{{text: quote}}, nil)
	if q == "" {
		return nil
	}
	i := strings.Index(collapseSpace(runs, nil), q)
	if i < 0 {
		return nil
	}
	// Back from the collapsed text to the runs: the runes that wrote its
	// bytes i and i+len(q)-1 (neither is a space: q is trimmed).
	first, last := [2]int{-1, -1}, [2]int{-1, -1}
	collapseSpace(runs, func(run, r, b int) {
		if b == i {
			first = [2]int{run, r}
		}
		if b == i+len(q)-1 {
			last = [2]int{run, r + 1}
		}
	})
	var segs []library.HighlightSegment
	for k := first[0]; k <= last[0] && k >= 0; k++ {
		run := runs[k]
		if run.brk {
			continue
		}
		text := []rune(run.text)
		from, to := 0, len(text)
		if k == first[0] {
			from = first[1]
		}
		if k == last[0] {
			to = last[1]
		}
		piece := string(text[from:to])
		if strings.TrimSpace(piece) == "" {
			continue
		}
		path := run.path
		if path == "" {
			path = "/"
		}
		if n := len(segs); n > 0 && segs[n-1].XPath == path && segs[n-1].EndOffset == run.at+from {
			segs[n-1].EndOffset = run.at + to
			segs[n-1].Text = clipString(segs[n-1].Text+piece, library.MaxSegmentText-1)
			continue
		}
		if len(segs) == library.MaxSegments {
			return nil
		}
		segs = append(segs, library.HighlightSegment{XPath: path, StartOffset: run.at + from, EndOffset: run.at + to,
			Text: clipString(piece, library.MaxSegmentText-1)})
	}
	return segs
}

// collapseSpace returns the text of runs with each stretch of white space
// and block boundaries as one space, none at either end; at, when not nil,
// is called for each rune written, with its run, its index in the run's
// text and the first byte it wrote.
func collapseSpace(runs []textRun, at func(run, r, b int)) string {
	var b strings.Builder
	pending := false // a space to write before the next rune (none at the start)
	for k, run := range runs {
		if run.brk {
			pending = b.Len() > 0
			continue
		}
		r := 0
		for _, ch := range run.text {
			if unicode.IsSpace(ch) {
				pending = b.Len() > 0
				r++
				continue
			}
			if pending {
				b.WriteByte(' ')
				pending = false
			}
			if at != nil {
				at(k, r, b.Len())
			}
			b.WriteRune(ch)
			r++
		}
	}
	return b.String()
}

// contentBody parses content and returns its body (nil for none).
func contentBody(content string) *html.Node {
	if strings.TrimSpace(content) == "" {
		return nil
	}
	root, err := html.Parse(strings.NewReader(content))
	if err != nil {
		return nil
	}
	return findBody(root)
}

func findBody(n *html.Node) *html.Node {
	if n.Type == html.ElementNode && n.Data == "body" {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if b := findBody(c); b != nil {
			return b
		}
	}
	return nil
}

// contentText is a parsed content's body and its text (its text nodes in
// document order), with where each element's text lies in it: an item's
// quotes are looked for in slices of one copy of its text, not in a new
// copy of each element's text at each level of each quote's walk.
type contentText struct {
	body *html.Node
	text string
	span map[*html.Node][2]int
}

// newContentText reads the text of body (nil: none), parsed from size
// bytes of HTML (its text is shorter: the text's buffer is allocated once).
func newContentText(body *html.Node, size int) *contentText {
	ct := &contentText{body: body, span: map[*html.Node][2]int{}}
	if body != nil {
		var b strings.Builder
		b.Grow(size)
		writeText(&b, body, ct.span)
		ct.text = b.String()
	}
	return ct
}

// textOf is the text of n's text nodes, in document order.
func textOf(n *html.Node) string {
	var b strings.Builder
	writeText(&b, n, nil)
	return b.String()
}

// writeText writes the text of n's text nodes to b, in document order,
// and, when span is not nil, where each element's text lies in b.
func writeText(b *strings.Builder, n *html.Node, span map[*html.Node][2]int) {
	if n.Type == html.TextNode {
		b.WriteString(n.Data)
	}
	start := b.Len()
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		writeText(b, c, span)
	}
	if span != nil && n.Type == html.ElementNode {
		span[n] = [2]int{start, b.Len()}
	}
}

// of is the text of element n of the body.
func (ct *contentText) of(n *html.Node) string {
	s := ct.span[n]
	return ct.text[s[0]:s[1]]
}
