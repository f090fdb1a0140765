package articles

import (
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"golang.org/x/net/html"
)

// contentPolicy is what saved content may keep of its HTML: bluemonday's
// policy for user-generated content (formatting, headings, lists, quotes,
// code, links, images, tables; http, https and mailto URLs only, links
// rel="nofollow"). Scripts, styles, event handlers, style attributes,
// iframes, objects, SVG and forms are dropped, and so is the text inside
// script and style elements. A Policy is safe for concurrent use.
var contentPolicy = bluemonday.UGCPolicy()

// SanitizeHTML is the one cleaning of untrusted HTML before it is stored:
// newsletters as received and articles as extracted. The content is later
// shown by clients and exported, so it must be safe to render.
func SanitizeHTML(s string) string {
	if strings.TrimSpace(s) == "" {
		return s
	}
	// As contentPolicy.Sanitize, into a builder of the input's size (it
	// grows a buffer from nothing, then copies it into the string).
	var b strings.Builder
	b.Grow(len(s))
	if contentPolicy.SanitizeReaderToWriter(strings.NewReader(s), &b) != nil {
		return ""
	}
	return fitted(b.String(), b.Cap())
}

// fitted is s, built in a buffer of size capacity, copied when it is less
// than half of it: a content the policy cut down (scripts, styles, data:
// images) must not keep its input's memory alive, which an import's batch,
// sized by its contents' lengths, does not count.
func fitted(s string, capacity int) string {
	if len(s) < capacity/2 {
		return strings.Clone(s)
	}
	return s
}

// HTMLText is the visible text of an HTML body (no scripts or styles):
// the text of a newsletter or an imported item that has only HTML.
func HTMLText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	b.Grow(len(s)) // the text is shorter than its HTML (fitted once read)
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return fitted(strings.TrimSpace(b.String()), b.Cap())
		case html.StartTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head":
				skip++
			case "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6":
				b.WriteString("\n")
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head":
				if skip > 0 {
					skip--
				}
			}
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
				b.WriteString(" ")
			}
		}
	}
}

// Attr is the value of n's attribute key ("" when n has none).
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
