package export

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// EPUBPath serves an EPUB 3 of one item (?id=) or of the items a search
// finds (?q=, the query language of search and saved queries, and
// ?label=, a label's exact name), for
// e-readers. The book is written while it downloads: each item is read,
// cleaned to XHTML and written as one chapter, the package document and
// table of contents last (they list only ids and titles).
const EPUBPath = APIPath + "/epub"

// maxEPUBItems bounds the chapters of one book.
const maxEPUBItems = 1000

// epubChapter is what the package document and the table of contents
// keep of a chapter: its file, title and images.
type epubChapter struct {
	file, title string
	images      []epubImage
}

// epubImage is a stored image of an item written in the book: its file
// (under OEBPS/) and media type.
type epubImage struct{ href, mediaType string }

// epubImageTypes are the stored images' types a book carries: EPUB 3.2's
// core image types (WebP and AVIF are not, and a reader may not show
// them: those stay out, as images not stored).
var epubImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true}

// ServeBook answers a request for a book (?id= or ?q=) of m's items:
// for EPUBPath and for the acquisition links of the OPDS catalog.
func (x *Exports) ServeBook(w http.ResponseWriter, r *http.Request, m *members.Member) {
	id, q, label := r.URL.Query().Get("id"), r.URL.Query().Get("q"), r.URL.Query().Get("label")
	title := "Hearth: " + m.Username
	var next func(ctx context.Context) ([]*library.SavedItem, error)
	switch {
	case id != "" && (q != "" || label != ""):
		writeRESTError(w, r, http.StatusBadRequest, "give id, or q and label, not both")
		return
	case id != "":
		it, err := library.Of(x.store).SavedItem(r.Context(), m.ID, id)
		if errors.Is(err, storage.ErrNotFound) {
			writeRESTError(w, r, http.StatusNotFound, "no item has this id")
			return
		}
		if err != nil {
			x.epubFailed(w, r, err)
			return
		}
		title = it.Title
		done := false
		next = func(context.Context) ([]*library.SavedItem, error) {
			if done {
				return nil, nil
			}
			done = true
			return []*library.SavedItem{it}, nil
		}
	default:
		q, label, srch, err := x.feedSearch(r, "", "a book")
		if err != nil {
			writeRESTError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		if q != "" || label != "" {
			title = feedTitle(q, label)
		}
		// Such a book may read a thousand items and their images:
		// a member's are written one at a time, as its exports are, so
		// that a client (or a feed reader holding the feed's secret)
		// repeating its request cannot make this process write many at
		// once.
		key := exportKey{x.store, m.ID, true}
		if _, busy := exporting.LoadOrStore(key, struct{}{}); busy {
			w.Header().Set("Retry-After", strconv.Itoa(exportRetryAfter))
			writeRESTError(w, r, http.StatusTooManyRequests, "Your previous book is still being downloaded; try again once it has finished.")
			return
		}
		defer exporting.Delete(key)
		p := library.PageRequest{Field: srch.Field, Desc: srch.Desc, First: 100}
		more := true
		next = func(ctx context.Context) ([]*library.SavedItem, error) {
			// (A page a pending emptying of the trash cut short may hold
			// none, and more follow.)
			for more {
				page, err := library.Of(x.store).SavedItemsPage(ctx, m.ID, srch.Filter, p)
				if err != nil {
					return nil, err
				}
				p.After = page.NextAfter()
				more = p.After != ""
				if len(page.Items) > 0 {
					return page.Items, nil
				}
			}
			return nil, nil
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/epub+zip")
	h.Set("Content-Disposition", `attachment; filename="`+Slug(title, "hearth")+`.epub"`)
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	err := x.writeEPUB(r.Context(), bw, m.ID, title, next)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		x.log.Warn("EPUB interrupted", zap.String("member", m.Username), zap.Error(err))
	}
}

func (x *Exports) epubFailed(w http.ResponseWriter, r *http.Request, err error) {
	x.restFailed(w, r, err, "EPUB", "the store cannot make a book now; try again later", "the book could not be made; try again")
}

// writeEPUB writes the book: the mimetype first and uncompressed (EPUB
// OCF 3.3 section 4.3), then a chapter per item next gives, then the
// container, package document and navigation document.
func (x *Exports) writeEPUB(ctx context.Context, w io.Writer, memberID, title string, next func(context.Context) ([]*library.SavedItem, error)) error {
	now := x.now().UTC()
	zw := zip.NewWriter(w)
	// No date on the mimetype: a date is an extra field, which OCF forbids there.
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "mimetype", Method: zip.Store})
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, "application/epub+zip"); err != nil {
		return err
	}
	var chapters []epubChapter
	for len(chapters) < maxEPUBItems {
		items, err := next(ctx)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			if len(chapters) == maxEPUBItems {
				break
			}
			c, err := library.Of(x.store).ItemContent(ctx, memberID, it.ID)
			if errors.Is(err, storage.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			var hs []*library.Highlight
			if it.HighlightCount > 0 {
				if hs, err = library.Of(x.store).ItemHighlights(ctx, memberID, it.ID); err != nil {
					return err
				}
			}
			ch := epubChapter{file: fmt.Sprintf("c%04d.xhtml", len(chapters)+1), title: heading(it.Title)}
			images, err := x.writeEPUBImages(ctx, zw, memberID, it, c, &ch)
			if err != nil {
				return err
			}
			f, err := zw.CreateHeader(zipHeader("OEBPS/"+ch.file, it.UpdatedAt))
			if err != nil {
				return err
			}
			if err := writeChapter(f, it, c, hs, images); err != nil {
				return err
			}
			chapters = append(chapters, ch)
		}
	}
	if len(chapters) == 0 {
		chapters = append(chapters, epubChapter{file: "c0001.xhtml", title: "Nothing found"})
		f, err := zw.CreateHeader(zipHeader("OEBPS/c0001.xhtml", now))
		if err != nil {
			return err
		}
		if err := writeXHTML(f, "Nothing found", "<h1>Nothing found</h1><p>No saved item matches this search.</p>"); err != nil {
			return err
		}
	}
	if err := writeZipString(zw, "META-INF/container.xml", now, `<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
`); err != nil {
		return err
	}
	var man, spine, nav strings.Builder
	for i, ch := range chapters {
		fmt.Fprintf(&man, "    <item id=\"c%d\" href=\"%s\" media-type=\"application/xhtml+xml\"/>\n", i+1, ch.file)
		for j, img := range ch.images {
			fmt.Fprintf(&man, "    <item id=\"c%d-i%d\" href=\"%s\" media-type=\"%s\"/>\n", i+1, j, img.href, img.mediaType)
		}
		fmt.Fprintf(&spine, "    <itemref idref=\"c%d\"/>\n", i+1)
		fmt.Fprintf(&nav, "      <li><a href=\"%s\">%s</a></li>\n", ch.file, xmlText(ch.title))
	}
	sum := sha256.Sum256([]byte(memberID + "\x00" + title))
	// A name-based UUID (RFC 9562 version 5 layout) of the member and the
	// book's title: the same book downloaded again is the same book.
	sum[6], sum[8] = sum[6]&0x0f|0x50, sum[8]&0x3f|0x80
	uid := fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	opf := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid" xml:lang="und">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="uid">%s</dc:identifier>
    <dc:title>%s</dc:title>
    <dc:language>und</dc:language>
    <dc:publisher>Hearth</dc:publisher>
    <meta property="dcterms:modified">%s</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
%s  </manifest>
  <spine>
%s  </spine>
</package>
`, uid, xmlText(heading(title)), now.Format("2006-01-02T15:04:05Z"), man.String(), spine.String())
	if err := writeZipString(zw, "OEBPS/content.opf", now, opf); err != nil {
		return err
	}
	f, err = zw.CreateHeader(zipHeader("OEBPS/nav.xhtml", now))
	if err != nil {
		return err
	}
	if err := writeXHTML(f, "Contents", "<nav epub:type=\"toc\" id=\"toc\">\n    <h1>Contents</h1>\n    <ol>\n"+nav.String()+"    </ol>\n  </nav>"); err != nil {
		return err
	}
	return zw.Close()
}

// writeEPUBImages writes the stored images the item's content shows (of
// epubImageTypes) into the book, one read at a time, and lists them in ch;
// it returns their files by the address the content names them by.
func (x *Exports) writeEPUBImages(ctx context.Context, zw *zip.Writer, memberID string, it *library.SavedItem, c *library.ItemContent, ch *epubChapter) (map[string]string, error) {
	shown := map[string]bool{}
	for _, u := range articles.ContentImages(c.HTML, it.OriginalURL) {
		shown[u] = true
	}
	if len(shown) == 0 {
		return nil, nil
	}
	files := map[string]string{}
	err := library.Of(x.store).ForEachItemImage(ctx, memberID, it.ID, func(n int, img library.ItemImage, data []byte) error {
		if !shown[img.URL] || !epubImageTypes[img.Type] {
			return nil
		}
		href := fmt.Sprintf("images/%s-%d.%s", strings.TrimSuffix(ch.file, ".xhtml"), n, library.ImageExt(img.Type))
		// Stored as they are: images are compressed already.
		f, err := zw.CreateHeader(&zip.FileHeader{Name: "OEBPS/" + href, Method: zip.Store, Modified: it.UpdatedAt.UTC()})
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		files[img.URL] = href
		ch.images = append(ch.images, epubImage{href: href, mediaType: img.Type})
		return nil
	})
	return files, err
}

func writeZipString(zw *zip.Writer, name string, t time.Time, s string) error {
	f, err := zw.CreateHeader(zipHeader(name, t))
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, s)
	return err
}

// writeXHTML writes an XHTML content document with body.
func writeXHTML(w io.Writer, title, body string) error {
	_, err := fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="und" lang="und">
<head>
  <meta charset="utf-8"/>
  <title>%s</title>
</head>
<body>
  %s
</body>
</html>
`, xmlText(title), body)
	return err
}

// writeChapter writes an item as a chapter: its title, where it comes
// from, its content cleaned to XHTML with the highlighted passages marked
// (<mark>) and its stored images shown (images: their files by address),
// and its highlights with their notes at the end.
func writeChapter(w io.Writer, it *library.SavedItem, c *library.ItemContent, hs []*library.Highlight, images map[string]string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>%s</h1>\n", xmlText(heading(it.Title)))
	if u := absoluteHTTP(it.OriginalURL, nil); u != "" {
		fmt.Fprintf(&b, "<p><a href=\"%s\">%s</a></p>\n", xmlText(u), xmlText(it.OriginalURL))
	}
	var quotes []string
	for _, h := range hs {
		if q := strings.TrimSpace(HighlightText(h)); q != "" {
			quotes = append(quotes, q)
		}
	}
	if strings.TrimSpace(c.HTML) != "" {
		base, _ := url.Parse(it.OriginalURL)
		writeCleanXHTML(&b, c.HTML, base, quotes, images)
	} else {
		for _, p := range strings.Split(c.Text, "\n\n") {
			if p = strings.TrimSpace(p); p != "" {
				fmt.Fprintf(&b, "<p>%s</p>\n", xmlText(p))
			}
		}
	}
	if len(hs) > 0 {
		b.WriteString("<section>\n<h2>Highlights</h2>\n")
		for _, h := range hs {
			if q := HighlightText(h); q != "" { // a note on the item as a whole has none
				fmt.Fprintf(&b, "<blockquote><p><mark>%s</mark></p></blockquote>\n", xmlText(q))
			}
			if h.Note != "" {
				fmt.Fprintf(&b, "<p>%s</p>\n", xmlText(h.Note))
			}
		}
		b.WriteString("</section>\n")
	}
	return writeXHTML(w, heading(it.Title), b.String())
}

// epubKeep are the elements kept in a chapter, without their attributes
// (but a link's absolute http(s) address): others are unwrapped, and those
// of epubDrop removed with their content. An image stays when the site
// stored it (its copy is in the book: an EPUB may not load one from the
// web), as do picture elements (unwrapped, their img kept).
var epubKeep = map[string]bool{
	"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "ul": true, "ol": true, "li": true,
	"blockquote": true, "pre": true, "code": true, "em": true, "strong": true, "i": true, "b": true, "a": true, "br": true,
	"hr": true, "table": true, "thead": true, "tbody": true, "tr": true, "td": true, "th": true, "figure": true,
	"figcaption": true, "sup": true, "sub": true, "mark": true, "dl": true, "dt": true, "dd": true, "s": true, "q": true,
	"cite": true, "small": true, "abbr": true, "kbd": true, "var": true, "samp": true, "section": true, "div": true,
}

var epubDrop = map[string]bool{"script": true, "style": true, "noscript": true, "iframe": true, "object": true,
	"embed": true, "svg": true, "math": true, "head": true, "template": true, "form": true, "button": true,
	"input": true, "select": true, "textarea": true, "video": true, "audio": true, "source": true}

// epubInline are the kept elements that may not hold blocks (text within
// p, h1...): a block inside them ends them (unwrapped).
var epubBlock = map[string]bool{"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"ul": true, "ol": true, "li": true, "blockquote": true, "pre": true, "hr": true, "table": true, "thead": true,
	"tbody": true, "tr": true, "td": true, "th": true, "figure": true, "figcaption": true, "dl": true, "dt": true,
	"dd": true, "section": true, "div": true}

// writeCleanXHTML writes content as well-formed XHTML of the elements
// above, links made absolute against base, images pointing at their
// files in the book (images, by the address content names them by; the
// others left out), and the first place of each quote found in one text
// node wrapped in <mark>.
func writeCleanXHTML(b *strings.Builder, content string, base *url.URL, quotes []string, images map[string]string) {
	doc, err := html.Parse(strings.NewReader(content))
	if err != nil {
		return
	}
	m := &marker{quotes: quotes, marked: make([]bool, len(quotes)), budget: markBudget}
	var walk func(n *html.Node, inPhrase bool, parent string)
	walk = func(n *html.Node, inPhrase bool, parent string) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				if parent == "ul" || parent == "ol" || parent == "table" || parent == "tbody" || parent == "thead" || parent == "tr" || parent == "dl" {
					continue // text where the schema allows none (white space between items)
				}
				m.write(b, c.Data)
			case html.ElementNode:
				name := c.Data
				switch {
				case epubDrop[name]:
				case name == "img":
					alt := strings.TrimSpace(articles.Attr(c, "alt"))
					switch href := images[library.ImageSource(articles.Attr(c, "src"), articles.Attr(c, "srcset"), baseString(base))]; {
					case library.TrackingPixel(articles.Attr(c, "width"), articles.Attr(c, "height")) || !fits(parent, "span"):
					case href != "":
						fmt.Fprintf(b, "<img src=\"%s\" alt=\"%s\"/>", href, xmlText(alt))
					case alt != "":
						// Not in the book (not stored, or of a type
						// EPUB does not carry): what it showed, in words.
						fmt.Fprintf(b, "<span>[Image: %s]</span>", xmlText(alt))
					}
				case !epubKeep[name] || inPhrase && epubBlock[name] || !fits(parent, name):
					walk(c, inPhrase, parent)
				case name == "br" || name == "hr":
					b.WriteString("<" + name + "/>")
				default:
					if name == "a" {
						if u := absoluteHTTP(articles.Attr(c, "href"), base); u != "" {
							fmt.Fprintf(b, "<a href=\"%s\">", xmlText(u))
						} else {
							b.WriteString("<a>")
						}
					} else {
						b.WriteString("<" + name + ">")
					}
					phrase := inPhrase || !epubBlock[name] || name == "p" || strings.HasPrefix(name, "h") && len(name) == 2 || name == "pre" || name == "dt" || name == "figcaption"
					walk(c, phrase, name)
					b.WriteString("</" + name + ">")
				}
			default:
				walk(c, inPhrase, parent)
			}
		}
	}
	walk(doc, false, "body")
}

func baseString(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.String()
}

// fits reports whether a child element may stand in parent in XHTML
// (lists hold items, tables rows, rows cells; items and cells nowhere
// else; no link in a link).
func fits(parent, child string) bool {
	switch parent {
	case "ul", "ol":
		return child == "li"
	case "table":
		return child == "thead" || child == "tbody" || child == "tr"
	case "thead", "tbody":
		return child == "tr"
	case "tr":
		return child == "td" || child == "th"
	case "dl":
		return child == "dt" || child == "dd"
	case "a":
		return child != "a"
	}
	switch child {
	case "li", "thead", "tbody", "tr", "td", "th", "dt", "dd":
		return false
	case "figcaption":
		return parent == "figure"
	}
	return true
}

// markBudget bounds the bytes of a chapter's text that its quotes are
// looked for in (and the quotes passed over, a unit each): each text node
// is searched for every quote not placed yet, and an item may have
// thousands of highlights (an import joins up to 5,000 rows of one
// document into an entry, and adds entry after entry to one item) over
// megabytes of text. Past it the chapter's remaining quotes are not marked
// in its text (as a quote not found in one stretch of text is); they are
// listed at its end all the same. A book has at most maxEPUBItems chapters.
const markBudget = 256 << 20

// marker marks the first place of each quote in the text nodes it writes.
type marker struct {
	quotes []string
	marked []bool
	budget int
}

// write writes text with the first place of each quote not marked yet
// found there wrapped in <mark>.
func (m *marker) write(b *strings.Builder, text string) {
	for i, q := range m.quotes {
		if m.budget <= 0 {
			break
		}
		if m.marked[i] {
			m.budget--
			continue
		}
		m.budget -= len(text) + len(q)
		if j := strings.Index(text, q); j >= 0 {
			m.marked[i] = true
			m.write(b, text[:j])
			b.WriteString("<mark>" + xmlText(q) + "</mark>")
			m.write(b, text[j+len(q):])
			return
		}
	}
	b.WriteString(xmlText(text))
}

// absoluteHTTP is ref resolved against base when it is an http(s)
// address, else "".
func absoluteHTTP(ref string, base *url.URL) string {
	u, err := url.Parse(strings.TrimSpace(ref))
	if err != nil || ref == "" {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// xmlText escapes s for XML text and attributes, dropping the characters
// XML 1.0 does not allow.
func xmlText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r != 0xFFFE && r != 0xFFFF && (r < 0xD800 || r > 0xDFFF) {
			return r
		}
		return -1
	}, s)
	return html.EscapeString(s)
}
