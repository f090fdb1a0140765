package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Images an export carries with its items: Hearth's export holds each
// item's stored images as images/<item id>/<n>.<ext> (handlers/export) and
// lists them in saved_items.json with the address the content names each
// by. The reader gives each item the images of its export id (Item.Images);
// the runner stores them after the item's batch is written, one image at a
// time within the limits of the site's own image fetches, and reports the
// images it skipped as the job's failures. An image is read only then, at
// most the fetcher's size limit of it, so a file of huge, compressed or
// countless images costs no more than that image by image.

// imagesDir is where Hearth's export keeps its items' images.
const imagesDir = "images/"

// ImageFile is an image an export carries for an item: the address the
// item's content names it by ("" when the export does not say: an export
// made before it listed them, paired with the content's images by the
// runner), its member of the zip (Ref), and why it is skipped when it is.
type ImageFile struct {
	URL, Ref, Skip string
	// More, with Skip, counts further images skipped with it.
	More int
}

// ImageSource is implemented by readers of exports that carry their items'
// images.
type ImageSource interface {
	// Image reads the image of Ref, at most max bytes: an *EntryError
	// when it cannot be read, is larger or expands more than a zip member
	// may.
	Image(ref string, max int64) ([]byte, error)
	// StrayImages are the export's images no item has taken, after the
	// last item: named as no image is, under an id no item has, or
	// listed for an item and missing. Only the first MaxImportFailures
	// are kept (all a job shows of its failures); more counts the others.
	StrayImages() (kept []EntryError, more int)
}

// strayImages are an export's stray images as they are met: the first
// MaxImportFailures, and a count of the others, whose messages are never
// made. A small zip can list millions of missing images (a list of
// short names for each of its items): they cost a count.
type strayImages struct {
	kept []EntryError
	more int
}

// add keeps the stray ref, its reason made of format and args, while
// fewer than MaxImportFailures are kept, and else counts it.
func (s *strayImages) add(ref, format string, args ...any) {
	if len(s.kept) >= library.MaxImportFailures {
		s.more++
		return
	}
	s.kept = append(s.kept, EntryError{Ref: strings.Clone(ref), Reason: fmt.Sprintf(format, args...)})
}

// HearthImage is an image of a HearthItem: the address its content names
// it by and its file in the zip.
type HearthImage struct {
	URL  string `json:"url"`
	File string `json:"file"`
}

// imageMember is an image file of the zip under images/<id>/.
type imageMember struct {
	name string
	n    int
}

// zipImages indexes the zip's images by the export's item id, and adds
// the names under images/ that name no image to stray.
func zipImages(z *zipArchive, stray *strayImages) map[string][]imageMember {
	byID := map[string][]imageMember{}
	for name := range z.files {
		rest, ok := strings.CutPrefix(name, imagesDir)
		if !ok || strings.HasSuffix(name, "/") {
			continue // not an image, or a folder
		}
		id, file, _ := strings.Cut(rest, "/")
		num, _, _ := strings.Cut(file, ".")
		n, err := strconv.Atoi(num)
		if id == "" || strings.Contains(file, "/") || err != nil || n < 0 || strconv.Itoa(n) != num {
			stray.add(name, "not named as an export's image (images/<item id>/<n>.<type>): skipped")
			continue
		}
		byID[id] = append(byID[id], imageMember{name: name, n: n})
	}
	for _, ms := range byID {
		sort.Slice(ms, func(i, j int) bool { return ms[i].n < ms[j].n || ms[i].n == ms[j].n && ms[i].name < ms[j].name })
	}
	return byID
}

// itemImages are the images of the export's item e: those its list names
// (its file must be one of the item's under images/), or, for an export
// made before items listed their images, the item's files in order. The
// item's other files are strays. A list longer than an item keeps costs
// no more than the item's files: the images past MaxItemImages are one
// skip that counts them all.
func (h *hearthReader) itemImages(e *HearthItem) []ImageFile {
	files := h.images[e.ID]
	delete(h.images, e.ID)
	if len(e.Images) == 0 {
		out := make([]ImageFile, 0, min(len(files), library.MaxItemImages+1))
		for i, m := range files {
			if i == library.MaxItemImages {
				out = append(out, ImageFile{Ref: m.name, More: len(files) - i - 1,
					Skip: fmt.Sprintf("it and the %d images after it are past the %d an item keeps", len(files)-i-1, library.MaxItemImages)})
				break
			}
			out = append(out, ImageFile{Ref: m.name})
		}
		return out
	}
	left := make(map[string]bool, len(files))
	for _, m := range files {
		left[m.name] = true
	}
	var out []ImageFile
	for i, img := range e.Images {
		inZip := left[img.File]
		delete(left, img.File)
		switch {
		case i >= library.MaxItemImages:
			if i == library.MaxItemImages {
				out = append(out, ImageFile{Ref: clipString(img.File, 200), More: len(e.Images) - i - 1,
					Skip: fmt.Sprintf("it and the %d images listed after it for the item are past the %d an item keeps", len(e.Images)-i-1, library.MaxItemImages)})
			}
		case !inZip:
			h.stray.add(clipString(img.File, 200), "listed for item %s but not in the zip (or not under images/%s/): skipped", clipString(e.ID, 40), clipString(e.ID, 40))
		case img.URL == "" || len(img.URL) > library.MaxURLLen:
			out = append(out, ImageFile{Ref: img.File, Skip: "its address in saved_items.json is empty or too long"})
		default:
			out = append(out, ImageFile{URL: img.URL, Ref: img.File})
		}
	}
	for _, m := range files {
		if left[m.name] {
			h.stray.add(m.name, "saved_items.json does not list it among its item's images: skipped")
		}
	}
	return out
}

func (h *hearthReader) StrayImages() ([]EntryError, int) {
	for id, ms := range h.images {
		for _, m := range ms {
			h.stray.add(m.name, "no item of the export has the id %s: skipped", clipString(id, 40))
		}
	}
	out, more := h.stray.kept, h.stray.more
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	h.stray, h.images = strayImages{}, nil
	return out, more
}

func (h *hearthReader) Image(ref string, max int64) ([]byte, error) {
	return h.z.image(ref, max)
}

// image reads the zip's member name, an image of at most max bytes.
func (z *zipArchive) image(name string, max int64) ([]byte, error) {
	zf := z.files[name]
	if zf == nil || !strings.HasPrefix(name, imagesDir) {
		return nil, &EntryError{Ref: name, Reason: "not in the zip"}
	}
	if zf.UncompressedSize64 > uint64(max) {
		return nil, &EntryError{Ref: name, Reason: fmt.Sprintf("larger than %d bytes, the site's limit for an image: skipped", max)}
	}
	// checkZip lets images/ members past its whole-file refusals (an
	// export's items stay importable when an image is damaged): they are
	// checked here, before they are read.
	if why := unreadable(zf, z.lim); why != "" {
		return nil, &EntryError{Ref: name, Reason: why + ": skipped"}
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, &EntryError{Ref: name, Reason: "cannot be read: " + err.Error()}
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, &EntryError{Ref: name, Reason: "cannot be read: " + err.Error()}
	}
	if int64(len(b)) > max {
		return nil, &EntryError{Ref: name, Reason: fmt.Sprintf("larger than %d bytes, the site's limit for an image: skipped", max)}
	}
	return b, nil
}

// Image reads an image of the wrapped reader's export.
func (c *closing) Image(ref string, max int64) ([]byte, error) {
	if s, ok := c.Reader.(ImageSource); ok {
		return s.Image(ref, max)
	}
	return nil, &EntryError{Ref: ref, Reason: "the export carries no images"}
}

// StrayImages passes on the wrapped reader's stray images.
func (c *closing) StrayImages() ([]EntryError, int) {
	if s, ok := c.Reader.(ImageSource); ok {
		return s.StrayImages()
	}
	return nil, 0
}

// itemImages are an entry's item as written and the images the export
// carries for it.
type itemImages struct {
	in    *library.ImportItem
	files []ImageFile
}

// storeImages stores the images of the items of a batch just written, one
// image a transaction as the site's fetches do (library.StoreImportedImage:
// the type sniffed from the bytes, MaxItemImages, the member's quota),
// each at most ImageMaxBytes and an item's at most MaxItemImageBytes
// together; then counts them in the job, the skipped ones among its
// failures, and clears its ImagesFrom. false: stopped (ctx) or the store
// failed; the job resumes from its ImagesFrom.
func (r *Runner) storeImages(ctx context.Context, src Reader, j *library.ImportJob, pending *[]itemImages) bool {
	images, ok := src.(ImageSource)
	if !ok {
		*pending = (*pending)[:0]
		return true
	}
	lib := library.Of(r.store)
	stored, more, quotaFull := 0, 0, false
	var skipped []EntryError
	skip := func(ref, reason string) { skipped = append(skipped, EntryError{Ref: ref, Reason: reason}) }
	for _, p := range *pending {
		id, err := lib.ImportedItemID(ctx, j.MemberID, p.in)
		if errors.Is(err, storage.ErrNotFound) {
			for _, f := range p.files {
				skip(f.Ref, "its item was not imported: skipped")
				more += f.More
			}
			continue
		}
		if err != nil {
			return r.imagesFailed(ctx, j, err)
		}
		named := r.unnamedImages(p)
		total := 0
		for i, f := range p.files {
			switch {
			case f.Skip != "":
				skip(f.Ref, f.Skip)
				more += f.More
				continue
			case quotaFull:
				skip(f.Ref, "the member's image quota is reached: skipped")
				continue
			case f.URL == "" && named == nil:
				skip(f.Ref, "the export does not say which of its item's images it is (made before exports listed them), and the item's content does not show as many images as the export has files for it: skipped")
				continue
			case f.URL == "":
				f.URL = named[i]
			}
			data, err := images.Image(f.Ref, r.opts.ImageMaxBytes)
			var ee *EntryError
			if errors.As(err, &ee) {
				skip(ee.Ref, ee.Reason)
				continue
			}
			if err != nil {
				return r.imagesFailed(ctx, j, err)
			}
			if total+len(data) > library.MaxItemImageBytes {
				skip(f.Ref, fmt.Sprintf("its item's images would take more than %d bytes, the site's limit: skipped", library.MaxItemImageBytes))
				continue
			}
			added, err := lib.StoreImportedImage(ctx, j.MemberID, id, f.URL, data, r.opts.ImageQuota)
			switch {
			case err == nil || errors.Is(err, storage.ErrNotSynced):
				// Not synced: written all the same, and the job's end,
				// which sees the failed sync, fails the job saying so.
				// An image the item had already is not counted.
				if added {
					stored++
				}
				total += len(data)
			case errors.Is(err, library.ErrImageQuota):
				// As the fetch queue: no further image of the member is
				// stored (nor read).
				quotaFull = true
				skip(f.Ref, "the member's image quota is reached: skipped")
			case errors.Is(err, storage.ErrNotFound):
				skip(f.Ref, "its item was deleted meanwhile: skipped")
			case storage.IsInvalid(err):
				skip(f.Ref, err.Error()+": skipped")
			default:
				return r.imagesFailed(ctx, j, err)
			}
		}
	}
	*pending = (*pending)[:0]
	return r.countImages(ctx, j, stored, skipped, more, true)
}

// unnamedImages are the addresses of p's images for an export that does
// not name them (made before exports listed them): the images its item's
// content shows, in order, as the fetch queue stored them, when there are
// as many as the export has files for the item (every image was stored);
// nil otherwise, or when it names them.
func (r *Runner) unnamedImages(p itemImages) []string {
	if r.opts.ContentImages == nil || len(p.files) == 0 || p.files[0].URL != "" {
		return nil
	}
	base, _ := library.NormalizeURL(p.in.URL)
	named := r.opts.ContentImages(p.in.HTML, base)
	if len(named) != len(p.files) {
		return nil
	}
	return named
}

// strayImages counts the export's images no item took among the job's
// skipped images, once its last entry is written, and marks them counted
// in the same update: a job run again after a stop before its end (the
// file is read again from its start) counts them once.
func (r *Runner) strayImages(ctx context.Context, src Reader, j *library.ImportJob) bool {
	images, ok := src.(ImageSource)
	if !ok || j.StraysCounted {
		return true
	}
	stray, more := images.StrayImages()
	_, err := library.Of(r.store).UpdateImportJob(ctx, j.MemberID, j.ID, func(x *library.ImportJob) {
		if !x.StraysCounted {
			x.StraysCounted = true
			addImages(x, 0, stray, more)
		}
	})
	if err != nil && !errors.Is(err, storage.ErrNotSynced) { // not synced: as in storeImages
		return r.imagesFailed(ctx, j, err)
	}
	return true
}

// countImages adds stored and skipped images to the job (more skipped
// than listed, clearing its ImagesFrom when done says the pending images
// are all taken).
func (r *Runner) countImages(ctx context.Context, j *library.ImportJob, stored int, skipped []EntryError, more int, done bool) bool {
	if stored == 0 && len(skipped) == 0 && !done {
		return true
	}
	_, err := library.Of(r.store).UpdateImportJob(ctx, j.MemberID, j.ID, func(x *library.ImportJob) {
		if done {
			x.ImagesFrom = 0
		}
		addImages(x, stored, skipped, more)
	})
	if err != nil && !errors.Is(err, storage.ErrNotSynced) { // not synced: as above
		return r.imagesFailed(ctx, j, err)
	}
	return true
}

// addImages counts stored and skipped images (more skipped than listed)
// in x, listing the skipped ones among its failures while it lists fewer
// than MaxImportFailures.
func addImages(x *library.ImportJob, stored int, skipped []EntryError, more int) {
	x.Images += stored
	x.ImagesSkipped += len(skipped) + more
	for _, s := range skipped {
		if len(x.Failures) >= library.MaxImportFailures {
			break
		}
		x.Failures = append(x.Failures, library.ImportFailure{Ref: clipString(s.Ref, 200), Reason: clipString(s.Reason, 500)})
	}
}

// imagesFailed logs a store's failure to take an import's images (not a
// stop); the job is resumed from its ImagesFrom.
func (r *Runner) imagesFailed(ctx context.Context, j *library.ImportJob, err error) bool {
	if ctx.Err() == nil && !errors.Is(err, storage.ErrNotFound) {
		r.log.Error("import images", zap.String("job", j.ID), zap.Error(err))
	}
	return false
}
