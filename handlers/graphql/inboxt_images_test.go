package graphql_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// crumbPage is an article whose paragraph holds, before the text a
// highlight marks (crumbHighlight), a tracking pixel, an image of another
// origin and one named by a path on the article's site; an image not
// stored follows.
const (
	crumbPage = `<h1>Crumb</h1><p>First proof, then the second.</p>` +
		`<p>Before the pictures<img src="https://tracker.example/open.gif" width="1" height="1">` +
		`<img src="https://cdn.example/loaf.png" alt="A loaf"><img src="/crumb.jpg" alt="The crumb">` +
		` the crumb is open and glossy after a long rise.</p>` +
		`<p><img src="https://cdn.example/missing.png" alt="Not stored">Shape it tight.</p>`
	crumbHighlight = "the crumb is open and glossy"
	// appContainer is where Inboxt's web app puts the content in its page
	// (#highlight-container): the xpaths it writes start with the path
	// of that element, which the content never changes.
	appContainer = "/html[1]/body[1]/div[1]/div[1]/main[1]/div[2]/div[1]"
)

// What Inboxt's web app shows of an entry (contentHtml, read by entries'
// fast path and by savedItem through gqlgen's executor, which the app's
// reader asks) never makes the member's browser ask another origin for a
// tracking pixel or for an image the site stored: the pixels are left
// out, the stored images named by their address on the site, which
// answers the app's session cookie (the app is on the host of the API it
// calls); an image not stored keeps its address, as in the feed. A
// highlight the app made on the content as saved, after those images, is
// still drawn on the same text: the app (apps/web/src/utils/highlightsDOM.ts
// and components/HighlightableArticle/HighlightableArticle.tsx of
// Inboxt/inboxt @45f4314) sets the content as its container's innerHTML and
// anchors a highlight by the path of the element holding its text, each
// step a tag numbered among same-named siblings (getAbsoluteXPath), plus
// "::0", and by offsets into that element's text (applyHighlightsToDOM
// walks its text nodes): inboxtAnchor and inboxtResolve do the same here.
func TestInboxtContentShowsStoredImagesWithoutPixels(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.URL, in.Title, in.HTML = "https://bread.example/crumb", "Crumb", crumbPage
	})
	p, j, _ := testImages(t)
	for _, x := range []struct {
		src  string
		data []byte
	}{{"https://cdn.example/loaf.png", p}, {"https://bread.example/crumb.jpg", j}} {
		if _, err := library.Of(e.store).StoreItemImage(t.Context(), e.member.ID, it.ID, x.src, x.data, libraryservice.DefaultImageQuota); err != nil {
			t.Fatalf("%s: %v", x.src, err)
		}
	}
	letter := e.saveArticle(e.member.ID, 2, func(in *library.NewItem) {
		in.Type, in.URL, in.Title, in.HTML = library.TypeNewsletter, "", "Letter", pixelLetter
	})

	// A highlight made in the app on the content as saved.
	path, start, end := inboxtAnchor(t, crumbPage, crumbHighlight)
	seg := map[string]any{"xpath": appContainer + path + "::0", "startOffset": start, "endOffset": end, "text": crumbHighlight,
		"beforeText": "Before the pictures ", "afterText": " after a long rise."}
	e.doAs(e.session, createHighlightMutation, map[string]any{"data": map[string]any{"savedItemId": it.ID, "segments": []any{seg}}}, nil)

	var page struct {
		Entries struct {
			Edges []struct {
				Node struct {
					ID         string
					Article    *struct{ ContentHTML string }
					Newsletter *struct{ ContentHTML string }
				}
			}
		}
	}
	e.doAs(e.session, `{ entries(query: {first: 10}) { edges { node { ... on SavedItem { id article { contentHtml } newsletter { contentHtml } } } } } }`, nil, &page)
	var one struct {
		SavedItem struct {
			Article    struct{ ContentHTML string }
			Highlights []struct {
				Segments []struct {
					XPath                  string
					StartOffset, EndOffset int
				}
			}
		}
	}
	e.doAs(e.session, `query($id: String!) { savedItem(query: {id: $id}) { article { contentHtml } highlights { segments { xpath startOffset endOffset } } } }`,
		map[string]any{"id": it.ID}, &one)
	contents := map[string]string{"savedItem": one.SavedItem.Article.ContentHTML}
	for _, edge := range page.Entries.Edges {
		switch n := edge.Node; {
		case n.ID == it.ID && n.Article != nil:
			contents["entries"] = n.Article.ContentHTML
		case n.ID == letter.ID && n.Newsletter != nil:
			wantNoPixels(t, "the newsletter in entries", n.Newsletter.ContentHTML)
		default:
			t.Fatalf("entries: %+v", page)
		}
	}
	site := []string{export.ImageAPIPath + it.ID + "/0", export.ImageAPIPath + it.ID + "/1"}
	for what, c := range contents {
		if strings.Contains(c, "tracker.example") || strings.Contains(c, "cdn.example/loaf.png") || strings.Contains(c, "crumb.jpg") ||
			!strings.Contains(c, `<img alt="A loaf" src="`+site[0]+`"`) || !strings.Contains(c, `<img alt="The crumb" src="`+site[1]+`"`) ||
			!strings.Contains(c, `<img src="https://cdn.example/missing.png" alt="Not stored">`) {
			t.Errorf("%s's contentHtml: want the stored images at %v, the one not stored as it is and no pixel:\n%s", what, site, c)
		}
		hs := one.SavedItem.Highlights
		if len(hs) != 1 || len(hs[0].Segments) != 1 {
			t.Fatalf("highlights: %+v", hs)
		}
		sg := hs[0].Segments[0]
		for _, content := range []string{crumbPage, c} {
			if got := inboxtResolve(t, content, sg.XPath, sg.StartOffset, sg.EndOffset); got != crumbHighlight {
				t.Errorf("the highlight %+v on %s's content lands on %q, want %q:\n%s", sg, what, got, crumbHighlight, content)
			}
		}
	}
	// The app's img asks with its session cookie, from its own page.
	for n, want := range [][]byte{p, j} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+site[n], nil)
		authorize(req, e.session)
		resp, b := send(t, req)
		if resp.StatusCode != http.StatusOK || string(b) != string(want) || resp.Header.Get("Cross-Origin-Resource-Policy") != "same-origin" {
			t.Errorf("GET %s with the session: HTTP %d %v", site[n], resp.StatusCode, resp.Header)
		}
	}
}

// inboxtContainer is content as Inboxt's web app holds it: the children
// of its container element, set by innerHTML.
func inboxtContainer(t *testing.T, content string) *html.Node {
	t.Helper()
	div := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(strings.NewReader(content), div)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		div.AppendChild(n)
	}
	return div
}

// inboxtAnchor is where Inboxt's web app anchors a highlight of text (the
// first place content has it, within one text node): the path from its
// container to the element holding the text (getContainerTextNodePath,
// without its "::0") and the offsets of text among that element's
// children's text (wrapSafeRangeWithSpan). ASCII only: the app counts
// UTF-16 units.
func inboxtAnchor(t *testing.T, content, text string) (path string, start, end int) {
	t.Helper()
	var found *html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil && found == nil; c = c.NextSibling {
			if c.Type == html.TextNode && strings.Contains(c.Data, text) {
				found = c
			}
			walk(c)
		}
	}
	root := inboxtContainer(t, content)
	walk(root)
	if found == nil {
		t.Fatalf("%q is not in one text node of %s", text, content)
	}
	start = strings.Index(found.Data, text)
	for s := found.PrevSibling; s != nil; s = s.PrevSibling {
		start += len(textOf(s))
	}
	for el := found.Parent; el != root; el = el.Parent {
		n := 1
		for s := el.PrevSibling; s != nil; s = s.PrevSibling {
			if s.Type == html.ElementNode && s.Data == el.Data {
				n++
			}
		}
		path = "/" + el.Data + "[" + strconv.Itoa(n) + "]" + path
	}
	return path, start, start + len(text)
}

// inboxtResolve is the text Inboxt's web app draws a segment on in content
// (applyHighlightsToDOM): the element its xpath names, and in that
// element's text nodes, in order, the one where startOffset falls, from
// there the segment's length; "" when it names none.
func inboxtResolve(t *testing.T, content, xpath string, startOffset, endOffset int) string {
	t.Helper()
	rest, ok := strings.CutPrefix(strings.TrimSuffix(xpath, "::0"), appContainer)
	if !ok {
		t.Fatalf("xpath %s is not within the app's container", xpath)
	}
	el := inboxtContainer(t, content)
	for _, step := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
		tag, num, _ := strings.Cut(strings.TrimSuffix(step, "]"), "[")
		var next *html.Node
		n := 0
		for c := el.FirstChild; c != nil && next == nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == tag {
				if n++; strconv.Itoa(n) == num {
					next = c
				}
			}
		}
		if next == nil {
			return ""
		}
		el = next
	}
	var texts []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				texts = append(texts, c.Data)
			}
			walk(c)
		}
	}
	walk(el)
	at := 0
	for _, s := range texts {
		if at <= startOffset && startOffset < at+len(s) {
			local := startOffset - at
			return s[local:min(len(s), local+endOffset-startOffset)]
		}
		at += len(s)
	}
	return ""
}

// textOf is a node's textContent.
func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

// An Inboxt client calling with an API key (a script; no session to load
// the image route with) gets its stored images at addresses signed for
// each, as Omnivore's content shows them, which answer without
// credentials.
func TestInboxtContentForAnAPIKeyShowsSignedImages(t *testing.T) {
	e := newEnv(t, options{})
	it, data := saveWithImages(t, e)
	_, key, err := apitokens.Of(e.store).Create(t.Context(), e.member.ID, "script", 0)
	if err != nil {
		t.Fatal(err)
	}
	var one struct {
		SavedItem struct{ Article struct{ ContentHTML string } }
	}
	e.doAs(key, `query($id: String!) { savedItem(query: {id: $id}) { article { contentHtml } } }`, map[string]any{"id": it.ID}, &one)
	c := one.SavedItem.Article.ContentHTML
	srcs := regexp.MustCompile(regexp.QuoteMeta(e.srv.URL)+`/api/feed/i/[^"\s]+`).FindAllString(c, -1)
	if len(srcs) != len(data) || strings.Contains(c, key) {
		t.Fatalf("contentHtml for an API key: want %d signed image addresses and not the key:\n%s", len(data), c)
	}
	for n, u := range srcs {
		resp, b := send(t, mustRequest(t, u))
		if resp.StatusCode != http.StatusOK || string(b) != string(data[n]) {
			t.Errorf("GET %s without credentials: HTTP %d", u, resp.StatusCode)
		}
	}
}
