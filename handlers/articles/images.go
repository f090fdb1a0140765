package articles

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Images of saved content are fetched once, at save time, by the fetch
// queue's worker with the article fetcher (its address policy, timeout and
// size limit), and stored with the item (storage/library/images.go): the
// reader and the exports show the stored copies, and the member's reading
// is never announced to the image's origin.

// StoredImage reads the member's stored image rest names ("<item id>/<n>",
// n in its one decimal form): storage.ErrNotFound when it names none.
func StoredImage(ctx context.Context, store *storage.Store, memberID, rest string) (*library.ItemImage, []byte, error) {
	id, num, _ := strings.Cut(rest, "/")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num || id == "" {
		return nil, nil, storage.ErrNotFound
	}
	return library.Of(store).ItemImageData(ctx, memberID, id, n)
}

// WriteImage answers with a stored image: its sniffed raster type, never
// sniffed again by the browser, cached for a year (an item's image n never
// changes: images are only added, and go with their item) by the member's
// browser alone, under a policy that lets it do nothing but be an image,
// shown by pages of this site only unless the caller set
// Cross-Origin-Resource-Policy before (a feed's images are shown by the
// feed reader's pages).
func WriteImage(w http.ResponseWriter, r *http.Request, img *library.ItemImage, data []byte) {
	h := w.Header()
	if h.Get("Cross-Origin-Resource-Policy") == "" {
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
	}
	h.Set("Content-Type", img.Type)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(data)
}

// itemImagesBudget bounds the time the fetches of one item's images may
// take together (library.MaxItemImages and MaxItemImageBytes bound how
// many and how large, the fetcher's size limit each image).
const itemImagesBudget = time.Minute

// SaveContent saves in (content the client or a mail brought) and queues
// the fetch of the images it names; created says the item is new.
func (s *Service) SaveContent(ctx context.Context, memberID string, in library.NewItem) (*library.SavedItem, bool, error) {
	private := s.private()
	in.FetchImages, in.ImagesPrivate = true, private
	it, created, err := library.Of(s.store).SaveItem(ctx, memberID, in)
	if err == nil && in.HTML != "" {
		s.queuedFetch(ctx, library.PendingFetch{MemberID: memberID, ItemID: it.ID, URL: it.OriginalURL, Private: private, Images: true})
	}
	return it, created, err
}

// ContentImages are the addresses of the images html names that are to be
// fetched, in order and once each: not tracking pixels, not data:, at
// most library.MaxItemImages; relative ones resolved against base.
func ContentImages(src, base string) []string {
	var out []string
	seen := map[string]bool{}
	z := html.NewTokenizer(strings.NewReader(src))
	for len(out) < library.MaxItemImages {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		t := z.Token()
		if t.Data != "img" {
			continue
		}
		a := map[string]string{}
		for _, x := range t.Attr {
			a[x.Key] = x.Val
		}
		if library.TrackingPixel(a["width"], a["height"]) {
			continue
		}
		if u := library.ImageSource(a["src"], a["srcset"], base); u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// fetchImages fetches and stores the images of an item's saved content,
// then drops its images entry. Images that fail (refused address, not a
// raster image, too large, over the member's quota) stay unstored: the
// reader shows their placeholder. Stopped by ctx, it leaves the entry.
func (s *Service) fetchImages(ctx context.Context, p library.PendingFetch) {
	lib := library.Of(s.store)
	c, err := lib.ItemContent(ctx, p.MemberID, p.ItemID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		if ctx.Err() == nil {
			s.log.Error("read content for its images", zap.String("item", p.ItemID), zap.Error(err))
		}
		return
	}
	if err == nil {
		if !s.storeImages(ctx, p, c.HTML) {
			return
		}
	}
	if err := lib.FinishImages(ctx, p.MemberID, p.ItemID); err != nil && ctx.Err() == nil && !s.refused(p, err) {
		s.log.Error("finish an item's images", zap.String("item", p.ItemID), zap.Error(err))
	}
}

// storeImages fetches and stores the images content names; false when ctx
// stopped it or the store refused to store one for now (the queue then
// pauses: the item's images are fetched again after the pause, not one
// after the other for nothing while the disk is full).
func (s *Service) storeImages(ctx context.Context, p library.PendingFetch, content string) bool {
	lib := library.Of(s.store)
	have, err := lib.ItemImages(ctx, p.MemberID, p.ItemID)
	if err != nil {
		return ctx.Err() == nil
	}
	stored := map[string]bool{}
	total := 0
	for _, img := range have {
		stored[img.URL] = true
		total += img.Size
	}
	fctx, cancel := context.WithTimeout(ctx, itemImagesBudget)
	defer cancel()
	for _, src := range ContentImages(content, p.URL) {
		if stored[src] {
			continue
		}
		if len(stored) >= library.MaxItemImages || fctx.Err() != nil {
			break
		}
		resp, err := s.opts.Fetcher.GetWithHeader(fctx, src, http.Header{"Accept": {"image/avif,image/webp,image/png,image/jpeg,image/gif;q=0.9"}})
		if ctx.Err() != nil {
			return false
		}
		if err != nil || resp.Status != http.StatusOK || total+len(resp.Body) > library.MaxItemImageBytes {
			continue
		}
		_, err = lib.StoreItemImage(ctx, p.MemberID, p.ItemID, src, resp.Body, s.opts.ImageQuota)
		switch {
		case err == nil:
			stored[src] = true
			total += len(resp.Body)
		case errors.Is(err, library.ErrImageQuota):
			s.log.Info("image quota reached: images not stored", zap.String("member", p.MemberID), zap.String("item", p.ItemID))
			return true
		case errors.Is(err, storage.ErrNotFound):
			return true // the item is gone
		case storage.IsInvalid(err):
			// not a raster image: its placeholder stays
		default:
			if ctx.Err() != nil || s.refused(p, err) {
				return false
			}
			s.log.Error("store an image", zap.String("item", p.ItemID), zap.Error(err))
		}
	}
	return true
}

// RewriteImages is content as it leaves the site for another program
// (a feed reader, Omnivore's plugins, the export's Markdown): without its
// tracking pixels (library.TrackingPixel, which the reader drops too), so
// that rendering it never tells a newsletter's sender it was read, and
// with the images whose address (as library.ImageSource reads it against
// base) files maps pointing at the mapped address instead, their srcset
// dropped; the rest unchanged. Content without images is returned as it
// is, unread.
func RewriteImages(content, base string, files map[string]string) string {
	if !HasTag(content, "img") {
		return content
	}
	var out strings.Builder
	out.Grow(len(content))
	z := html.NewTokenizer(strings.NewReader(content))
	var tag []byte // an img tag as written: reading its attributes changes the tokenizer's copy
	// The tag's attributes as read (unescaped, names in lower case): each
	// stays in the tokenizer's buffer until the next token.
	var attrs [][2][]byte
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		raw := z.Raw()
		// Only an img's attributes are read, and without making a token
		// of it: that took longer than the rest of an article.
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken || len(raw) < 4 || !asciiFoldEqual(string(raw[1:4]), "img") {
			out.Write(raw)
			continue
		}
		tag = append(tag[:0], raw...)
		name, more := z.TagName()
		if string(name) != "img" {
			out.Write(tag)
			continue
		}
		var src, srcset, width, height []byte
		attrs = attrs[:0]
		for more {
			var k, v []byte
			k, v, more = z.TagAttr()
			attrs = append(attrs, [2][]byte{k, v})
			switch string(k) {
			case "src":
				src = v
			case "srcset":
				srcset = v
			case "width":
				width = v
			case "height":
				height = v
			}
		}
		if library.TrackingPixel(string(width), string(height)) {
			continue
		}
		to, ok := "", false
		if len(files) > 0 {
			to, ok = files[library.ImageSource(string(src), string(srcset), base)]
		}
		if !ok {
			out.Write(tag)
			continue
		}
		writeWithSource(&out, attrs, to, tt == html.SelfClosingTagToken)
	}
	return out.String()
}

// writeWithSource writes the img tag of attrs pointing at to instead of
// its src and srcset, as html.Token's String writes it, without reading
// the tag a second time.
func writeWithSource(out *strings.Builder, attrs [][2][]byte, to string, selfClosing bool) {
	out.WriteString("<img")
	for _, a := range attrs {
		if k := string(a[0]); k == "src" || k == "srcset" {
			continue
		}
		out.WriteByte(' ')
		out.Write(a[0])
		out.WriteString(`="`)
		writeEscaped(out, a[1])
		out.WriteByte('"')
	}
	out.WriteString(` src="`)
	writeEscaped(out, []byte(to))
	out.WriteByte('"')
	if selfClosing {
		out.WriteByte('/')
	}
	out.WriteByte('>')
}

// writeEscaped writes an attribute's value escaped as html.Token's String
// escapes it.
func writeEscaped(out *strings.Builder, v []byte) {
	for _, c := range v {
		switch c {
		case '&':
			out.WriteString("&amp;")
		case '\'':
			out.WriteString("&#39;")
		case '<':
			out.WriteString("&lt;")
		case '>':
			out.WriteString("&gt;")
		case '"':
			out.WriteString("&#34;")
		case '\r':
			out.WriteString("&#13;")
		default:
			out.WriteByte(c)
		}
	}
}

// HasTag reports whether src has a tag named one of names (lower-case
// ASCII, compared in any case as the tokenizer compares tag names): a
// scan of every '<', without the lower-case copy of the whole article that
// Contains on it would take.
func HasTag(src string, names ...string) bool {
	for i := strings.IndexByte(src, '<'); i >= 0; {
		rest := src[i+1:]
		for _, n := range names {
			if len(rest) >= len(n) && asciiFoldEqual(rest[:len(n)], n) {
				return true
			}
		}
		j := strings.IndexByte(rest, '<')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// asciiFoldEqual reports whether s equals lower (lower-case ASCII) with
// ASCII letters in any case.
func asciiFoldEqual(s, lower string) bool {
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
