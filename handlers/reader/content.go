package reader

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// imagePath is where the n-th stored image of an item is served.
func imagePath(itemID string, n int) string {
	return Path + "/image/" + itemID + "/" + strconv.Itoa(n)
}

// readerContent is an item's saved HTML as the reader shows it: an image
// of another origin points at the copy the site stored when the item was
// saved (images: the item's, base: its URL), or, without one, is shown as
// its description, without its address; so the browser never asks another
// origin for anything (the page's policy would refuse it too) and shows
// no broken image. Images carried in the page (data:) stay; a path, even
// of this site, is no image the site stored (the reader writes those
// itself), and is shown as a placeholder too, so content never makes the
// member's browser ask this site for a path of its choosing either;
// 1×1 images, the tracking pixels of newsletters, are dropped, and so is
// noscript content (hidden behind it). Stored images stay img elements, placeholders elements
// without text, so the paths of highlights made elsewhere still name the
// same elements. The content's ids take contentIDPrefix (and its links to
// them, "#x", the same), so that a saved page's ids never name the page's
// own elements (the highlights' list, the labels' heading, the shortcuts'
// dialog), which come after it and which the script and ARIA find by id.
func readerContent(src, itemID, base string, images []library.ItemImage) string {
	// The sanitiser writes attributes as name="value", names in lower case.
	if !articles.HasTag(src, "img", "source", "noscript") && !strings.Contains(src, "id=") && !strings.Contains(src, `="#`) &&
		!strings.Contains(src, "headers=") {
		return src
	}
	stored := make(map[string]int, len(images))
	for n, img := range images {
		stored[img.URL] = n
	}
	var out bytes.Buffer
	out.Grow(len(src))
	z := html.NewTokenizer(strings.NewReader(src))
	noscript := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if noscript {
			// What a page shows without JavaScript: its images too,
			// were the member's JavaScript off.
			if name, _ := z.TagName(); tt == html.EndTagToken && string(name) == "noscript" {
				noscript = false
			}
			continue
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken || plainTag(z.Raw()) {
			out.Write(z.Raw())
			continue
		}
		raw := append([]byte(nil), z.Raw()...)
		t := z.Token()
		switch t.Data {
		case "noscript":
			noscript = tt == html.StartTagToken
		case "img":
			if library.TrackingPixel(attr(t, "width"), attr(t, "height")) {
				continue
			}
			alt := strings.TrimSpace(attr(t, "alt"))
			source := library.ImageSource(attr(t, "src"), attr(t, "srcset"), base)
			if n, ok := stored[source]; ok {
				out.WriteString(`<img src="` + html.EscapeString(imagePath(itemID, n)) + `" alt="` + html.EscapeString(alt) + `"` + sizeAttrs(t) + `>`)
				continue
			}
			// Only an image the page carries (data:) is shown as it is.
			if source == "" && inlineImage(attr(t, "src")) && attr(t, "srcset") == "" {
				writeTag(&out, raw, t)
				continue
			}
			if alt == "" {
				alt = "An image of the original page"
			}
			out.WriteString(missingImage(alt, t))
		case "source":
			// A picture's other sources are other origins' addresses;
			// its img shows the stored copy.
			if inlineImage(attr(t, "src")) && attr(t, "srcset") == "" {
				writeTag(&out, raw, t)
			}
		default:
			writeTag(&out, raw, t)
		}
	}
	return out.String()
}

// plainTag reports whether raw, a start tag, is written as it is without
// reading it as a token: one without attributes (no '=') that is not one
// readerContent changes (img, source, noscript). Most of an article's tags
// are such (p, em, li), and reading each as a token took as long as the
// rest of the page.
func plainTag(raw []byte) bool {
	if bytes.IndexByte(raw, '=') >= 0 || len(raw) < 2 {
		return false
	}
	return !articles.HasTag(string(raw), "img", "source", "noscript")
}

// contentIDPrefix starts the ids of saved content in the reader: none of
// the page's own ids starts with it.
const contentIDPrefix = "saved-"

// writeTag writes the start tag t (raw, as the content has it), its id, a
// link to an id within the content ("#x") and a cell's headers given
// contentIDPrefix.
func writeTag(out *bytes.Buffer, raw []byte, t html.Token) {
	changed := false
	for i, a := range t.Attr {
		switch {
		case a.Namespace != "":
		case a.Key == "id" && a.Val != "":
			t.Attr[i].Val, changed = contentIDPrefix+a.Val, true
		case a.Key == "href" && strings.HasPrefix(a.Val, "#") && len(a.Val) > 1 && !strings.HasPrefix(a.Val, "#:~:"):
			// (A text fragment, "#:~:text=…", names words, not an id.)
			t.Attr[i].Val, changed = "#"+contentIDPrefix+a.Val[1:], true
		case a.Key == "headers" && strings.TrimSpace(a.Val) != "":
			// A table cell's header cells, by their ids.
			ids := strings.Fields(a.Val)
			for j := range ids {
				ids[j] = contentIDPrefix + ids[j]
			}
			t.Attr[i].Val, changed = strings.Join(ids, " "), true
		}
	}
	if !changed {
		out.Write(raw)
		return
	}
	out.WriteString(t.String())
}

// missingImage is the placeholder of an image not stored: a box saying
// so with the image's description, the image's size when the page gave
// it, and no address, so the browser neither asks for anything nor draws
// its broken-image icon. It is an element of its own name with no text
// node: the text of the elements around it, the offsets of highlights,
// and the numbering of same-named siblings in their paths (an img, a
// span) stay as they were in the saved page. The stylesheet shows the
// label; assistive technologies read it as an image's.
func missingImage(alt string, t html.Token) string {
	return `<hearth-img role="img" aria-label="Image not stored: ` + html.EscapeString(alt) + `"` + sizeAttrs(t) + `></hearth-img>`
}

// sizeAttrs are an image's width and height attributes (numbers only), so
// the stored copy takes its place before it loads.
func sizeAttrs(t html.Token) string {
	var b strings.Builder
	for _, k := range []string{"width", "height"} {
		if v := attr(t, k); v != "" {
			if _, err := strconv.Atoi(v); err == nil {
				b.WriteString(` ` + k + `="` + v + `"`)
			}
		}
	}
	return b.String()
}

func attr(t html.Token, name string) string {
	for _, a := range t.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// inlineImage reports whether src is carried in the page (data:). A path
// is not: one in content without an address of its own (a newsletter) would
// be a request to this site, with the member's session, for whatever path
// the sender wrote (an export of the library, an app behind hearth_gate).
func inlineImage(src string) bool {
	return strings.HasPrefix(strings.TrimSpace(src), "data:image/")
}

// serveImage answers a stored image of the member's item (rest: "<item
// id>/<n>"), as the API does.
func (h *Handler) serveImage(w http.ResponseWriter, r *http.Request, m *members.Member, rest string) {
	img, data, err := articles.StoredImage(r.Context(), h.store, m.ID, rest)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	articles.WriteImage(w, r, img, data)
}
