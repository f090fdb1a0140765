package articles_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
)

// A stored image's tag is written as the HTML tokenizer writes the tag
// (html.Token's String) with its src pointing at the mapped address and
// its srcset dropped: attribute names in lower case, values escaped,
// self-closing tags kept so; the text around it, other images and
// tracking pixels as RewriteImages leaves them.
func TestRewriteImagesWritesTheTagAsTheTokenizer(t *testing.T) {
	to := "https://site.example/api/feed/i/m/i/0/k/s?a=1&b=\"2\""
	for _, tag := range []string{
		`<img src="https://cdn.example/a.png" alt="A &amp; B" width=600>`,
		`<IMG SRC='https://cdn.example/a.png' Alt="it's <b>" data-x="a\r\nb" hidden/>`,
		`<img srcset="https://cdn.example/a.png 1x, https://cdn.example/a2.png 2x" alt="">`,
		`<img alt='"' src=https://cdn.example/a.png title="&eacute;t&#233;">`,
	} {
		// What html.Token's String writes for the tag once changed.
		z := html.NewTokenizer(strings.NewReader(tag))
		z.Next()
		tok := z.Token()
		attrs := tok.Attr[:0]
		for _, a := range tok.Attr {
			if a.Key != "src" && a.Key != "srcset" {
				attrs = append(attrs, a)
			}
		}
		tok.Attr = append(attrs, html.Attribute{Key: "src", Val: to})
		in := "<p>before " + tag + ` after <img src="https://cdn.example/other.png"><img src="https://t.example/p.gif" width="1" height="1"></p>`
		want := "<p>before " + tok.String() + ` after <img src="https://cdn.example/other.png"></p>`
		if got := articles.RewriteImages(in, "https://cdn.example/post", map[string]string{"https://cdn.example/a.png": to}); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tag, got, want)
		}
	}
}
