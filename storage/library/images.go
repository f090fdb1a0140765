package library

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Images of saved content, kept with the item so that the reader, the
// exports and the backups never need the origin again (the member's
// reading is nobody else's business). They are keys derived from the item,
// written and removed by the item writer (itemwrite.go):
//
//	u/<member>/gql/imgs/<item id>     the item's stored images, in order
//	                                  (JSON: URL, media type, size)
//	u/<member>/gql/img/<item id>/<n>  the bytes of the n-th
//	u/<member>/gql/imgbytes           the member's image bytes (8 bytes),
//	                                  checked against the quota
//
// An item whose content names images of other origins gets an images
// entry in the fetch queue (fetchValue's "images "), in the transaction
// that saves the content; the fetch queue's worker fetches them with the
// article fetcher and stores them one per transaction (StoreItemImage).

// ItemImage is one stored image of an item: the address the content
// names it by, its media type (sniffed from its bytes) and its size.
type ItemImage struct {
	URL  string `json:"url"`
	Type string `json:"type"`
	Size int    `json:"size"`
}

// Bounds of one item's stored images: how many, and the bytes they may
// take together (each image is bounded by the fetcher's size limit, and a
// member's by the image quota). The fetch queue and the import keep them.
const (
	MaxItemImages     = 40
	MaxItemImageBytes = 20 << 20
)

// ErrImageQuota is returned by StoreItemImage when the image would take
// the member past the quota: it is not stored.
var ErrImageQuota = errors.New("library: the member's image quota is reached")

func imageListKey(memberID, itemID string) []byte {
	return storage.Key("u", memberID, "gql", "imgs", itemID)
}

func imageKey(memberID, itemID string, n int) []byte {
	return storage.Key("u", memberID, "gql", "img", itemID, strconv.Itoa(n))
}

func imageUsageKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "imgbytes") }

// itemImages reads the list of the item's stored images (nil for none).
func itemImages(tx *storage.Tx, memberID, itemID string) ([]ItemImage, error) {
	var list []ItemImage
	if err := tx.GetJSON(imageListKey(memberID, itemID), &list); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	return list, nil
}

// ItemImages lists the item's stored images; an image's number is its
// index in the list.
func (s Store) ItemImages(ctx context.Context, memberID, itemID string) ([]ItemImage, error) {
	var list []ItemImage
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		list, err = itemImages(tx, memberID, itemID)
		return err
	})
	return list, err
}

// ItemImageData returns the n-th stored image of the item and its bytes;
// storage.ErrNotFound when there is none.
func (s Store) ItemImageData(ctx context.Context, memberID, itemID string, n int) (*ItemImage, []byte, error) {
	var img *ItemImage
	var data []byte
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		list, err := itemImages(tx, memberID, itemID)
		if err != nil {
			return err
		}
		if n < 0 || n >= len(list) {
			return storage.ErrNotFound
		}
		img = &list[n]
		data, err = tx.Get(imageKey(memberID, itemID, n))
		return err
	})
	return img, data, err
}

// ForEachItemImage calls fn with each stored image of the item and its
// bytes, in order (for exports), one read at a time.
func (s Store) ForEachItemImage(ctx context.Context, memberID, itemID string, fn func(n int, img ItemImage, data []byte) error) error {
	list, err := s.ItemImages(ctx, memberID, itemID)
	if err != nil {
		return err
	}
	for n, img := range list {
		_, data, err := s.ItemImageData(ctx, memberID, itemID, n)
		if errors.Is(err, storage.ErrNotFound) {
			continue // its item was deleted meanwhile
		}
		if err != nil {
			return err
		}
		if err := fn(n, img, data); err != nil {
			return err
		}
	}
	return nil
}

// ImageBytes is how many bytes of images the member has stored.
func (s Store) ImageBytes(ctx context.Context, memberID string) (int64, error) {
	var n int64
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		n, err = countAt(tx, imageUsageKey(memberID))
		return err
	})
	return n, err
}

// FinishImages drops the item's images entry from the fetch queue (its
// images were fetched, or as many as could be). An entry that became a
// page fetch meanwhile (the member saved the URL again) stays.
func (s Store) FinishImages(ctx context.Context, memberID, itemID string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		v, err := tx.Get(fetchKey(memberID, itemID))
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if e := parseFetchEntry(string(v)); !e.images {
			return nil
		}
		return tx.Delete(fetchKey(memberID, itemID))
	})
}

// ImageSource is the address an image element is fetched from and known
// by: its src when that is an http(s) address, else the first candidate
// of its srcset; resolved against base (the item's URL, may be ""). ""
// when it has none this site could fetch (a data: image, a path).
func ImageSource(src, srcset, base string) string {
	cand := strings.TrimSpace(src)
	if !remoteImage(cand, base) {
		cand = ""
		if first, _, _ := strings.Cut(srcset, ","); strings.TrimSpace(first) != "" {
			cand = strings.Fields(first)[0]
		}
	}
	if cand == "" {
		return ""
	}
	u, err := url.Parse(cand)
	if err != nil {
		return ""
	}
	if !u.IsAbs() {
		if base == "" || strings.HasPrefix(cand, "data:") {
			return ""
		}
		b, err := url.Parse(base)
		if err != nil || !b.IsAbs() {
			return ""
		}
		u = b.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || len(u.String()) > MaxURLLen {
		return ""
	}
	u.Fragment = ""
	return u.String()
}

// remoteImage reports whether src names an image of another origin
// (absolute http(s), or relative to a base that is).
func remoteImage(src, base string) bool {
	l := strings.ToLower(src)
	switch {
	case l == "" || strings.HasPrefix(l, "data:"):
		return false
	case strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "//"):
		return true
	}
	return base != ""
}

// namesImages reports whether HTML may name images to fetch (a cheap
// look; the worker reads it properly).
func namesImages(html string) bool {
	l := strings.ToLower(html)
	return strings.Contains(l, "<img")
}

// ImageType is the media type of an image the reader shows, sniffed from
// its bytes (what its server said is not trusted): PNG, JPEG, GIF, WebP or
// AVIF; "" for anything else. SVG is never stored: it is a document that
// can hold script and links, and raster images are all the reader needs.
func ImageType(b []byte) string {
	switch t := http.DetectContentType(b); t {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return t
	}
	if len(b) >= 12 && string(b[4:8]) == "ftyp" && (string(b[8:12]) == "avif" || string(b[8:12]) == "avis") {
		return "image/avif"
	}
	return ""
}

// ImageExt is the file name extension of an image of media type typ (as
// ImageType names them).
func ImageExt(typ string) string {
	switch typ {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	case "image/avif":
		return "avif"
	}
	return "bin"
}

// TrackingPixel reports whether an image of these width and height
// attributes is a 1×1 (or 0×0) tracking pixel: never fetched nor shown.
func TrackingPixel(width, height string) bool {
	small := func(v string) bool {
		v = strings.TrimSuffix(strings.TrimSpace(v), "px")
		return v == "0" || v == "1"
	}
	return small(width) && small(height)
}
