package importer

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Zip exports. The archive's directory is checked whole before any member
// is read: names that climb out of it (.., absolute, backslashes), more
// members than the entry limit allows, and members that would expand past
// MaxCompressionRatio refuse the file. Members are then read one at a time,
// never past their declared size (archive/zip checks it) nor MaxEntryBytes
// for those read whole.

// ratioFloor is the size under which a member's compression ratio is not
// checked: small files of repeated text compress very well and harm no one.
const ratioFloor = 1 << 20

type zipArchive struct {
	zr    *zip.Reader
	files map[string]*zip.File
	lim   Limits
}

func checkZip(f *os.File, size int64, lim Limits) (*zipArchive, error) {
	// An entry is at most a few members (content, highlights, metadata).
	// The count is checked before archive/zip reads the directory, which
	// costs a few hundred bytes of memory per member: a 256 MiB upload
	// can hold millions of them. The end record's count is checked first
	// (it names the number in the refusal), then the headers are counted
	// up to the limit, since archive/zip reads past the declared count.
	max := 4*lim.MaxEntries + 100
	if e, ok := readZipEnd(f, size); ok {
		if e.count > uint64(max) {
			return nil, refuse("the zip archive has %d files, more than an import takes (%d)", e.count, max)
		}
		if zipHeaders(f, size, e.start, max) > max || e.atStart >= 0 && zipHeaders(f, size, e.atStart, max) > max {
			return nil, refuse("the zip archive has more files than an import takes (%d)", max)
		}
	}
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, refuse("the zip archive is damaged or incomplete (%v)", err)
	}
	if len(zr.File) > max {
		return nil, refuse("the zip archive has %d files, more than an import takes (%d)", len(zr.File), max)
	}
	z := &zipArchive{zr: zr, files: make(map[string]*zip.File, len(zr.File)), lim: lim}
	for _, zf := range zr.File {
		name := zf.Name
		if !safeName(name) {
			return nil, refuse("the zip archive has a file named %q, outside the archive: refused", clipString(name, 80))
		}
		if zf.Mode().Type()&os.ModeSymlink != 0 {
			return nil, refuse("the zip archive has a symbolic link (%q): refused", clipString(name, 80))
		}
		// An image of Hearth's export is checked when it is read
		// (zipArchive.image): one that fails is skipped, not the file.
		if why := unreadable(zf, lim); why != "" && !strings.HasPrefix(name, imagesDir) {
			return nil, refuse("%q: %s; the archive is refused", clipString(name, 80), why)
		}
		z.files[name] = zf
	}
	return z, nil
}

// unreadable says why the zip member zf is not read, "" when it may be:
// it would expand more than lim.MaxCompressionRatio times (a zip bomb), or
// is compressed with a method other than those every zip reader shares.
func unreadable(zf *zip.File, lim Limits) string {
	if zf.UncompressedSize64 > ratioFloor && (zf.CompressedSize64 == 0 || zf.UncompressedSize64/zf.CompressedSize64 > uint64(lim.MaxCompressionRatio)) {
		return fmt.Sprintf("expands more than %d times (a zip bomb)", lim.MaxCompressionRatio)
	}
	if zf.Method != zip.Store && zf.Method != zip.Deflate {
		return fmt.Sprintf("compressed with a method zip readers do not share (%d)", zf.Method)
	}
	return ""
}

// zipEnd is what a zip's end of central directory record (its zip64
// record's when it has one) says of the directory, found as archive/zip
// finds it (readDirectoryEnd; APPNOTE.TXT 4.3.14-4.3.16).
type zipEnd struct {
	count          uint64 // the members declared
	start, atStart int64  // where archive/zip begins reading headers; atStart -1 or its other choice
}

// readZipEnd reads r's end record without reading the directory. ok is
// false when archive/zip refuses the file at its end record.
func readZipEnd(r io.ReaderAt, size int64) (e zipEnd, ok bool) {
	const endLen, locLen, end64Len = 22, 20, 56
	var buf []byte
	var endAt int64 = -1
	// The last signature whose comment ends within the block, in the last
	// 1 KiB and then the last 65 KiB, as archive/zip.
	for _, n := range []int64{1024, 65 * 1024} {
		n = min(n, size)
		buf = make([]byte, n)
		if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
			return e, false
		}
		for i := len(buf) - endLen; i >= 0; i-- {
			if string(buf[i:i+4]) == "PK\x05\x06" && i+endLen+int(binary.LittleEndian.Uint16(buf[i+20:])) <= len(buf) {
				endAt, buf = size-n+int64(i), buf[i:]
				break
			}
		}
		if endAt >= 0 || n == size {
			break
		}
	}
	if endAt < 0 {
		return e, false
	}
	e.count = uint64(binary.LittleEndian.Uint16(buf[10:]))
	dirSize := uint64(binary.LittleEndian.Uint32(buf[12:]))
	dirOffset := uint64(binary.LittleEndian.Uint32(buf[16:]))
	if e.count == 0xffff || dirSize == 0xffff || dirOffset == 0xffffffff {
		// zip64: the locator just before the end record gives the zip64
		// end record's offset, which holds the count, the directory's
		// size and its offset as 8 bytes each at offset 32.
		lb := make([]byte, locLen)
		if endAt-locLen >= 0 {
			if _, err := r.ReadAt(lb, endAt-locLen); err != nil {
				return e, false
			}
		}
		// Without a locator of one disk the 32-bit values stand.
		off := int64(binary.LittleEndian.Uint64(lb[8:]))
		if string(lb[:4]) == "PK\x06\x07" && binary.LittleEndian.Uint32(lb[4:]) == 0 && binary.LittleEndian.Uint32(lb[16:]) == 1 && off >= 0 {
			rb := make([]byte, end64Len)
			if off > size-end64Len {
				return e, false
			}
			if _, err := r.ReadAt(rb, off); err != nil || string(rb[:4]) != "PK\x06\x06" {
				return e, false
			}
			endAt = off
			e.count = binary.LittleEndian.Uint64(rb[32:])
			dirSize, dirOffset = binary.LittleEndian.Uint64(rb[40:]), binary.LittleEndian.Uint64(rb[48:])
		}
	}
	if dirSize > math.MaxInt64 || dirOffset > math.MaxInt64 {
		return e, false
	}
	e.start, e.atStart = endAt-int64(dirSize), -1
	if e.start < 0 || e.start >= size {
		return e, false
	}
	if base := e.start - int64(dirOffset); base > 0 {
		// archive/zip reads from dirOffset instead when a header is there.
		e.atStart = int64(dirOffset)
	}
	return e, true
}

// zipHeaders counts the central directory headers archive/zip would read
// from r beginning at start: it reads them until one is not a header and
// checks their number against the end record's only modulo 65536, so the
// declared count does not bound it. Counting stops past limit, so the walk
// costs constant memory and at most limit+1 headers' reading.
func zipHeaders(r io.ReaderAt, size, start int64, limit int) int {
	const headerLen = 46
	br := bufio.NewReaderSize(io.NewSectionReader(r, start, size-start), 64<<10)
	h := make([]byte, headerLen)
	n := 0
	for n <= limit {
		if _, err := io.ReadFull(br, h); err != nil || string(h[:4]) != "PK\x01\x02" {
			break
		}
		rest := int(binary.LittleEndian.Uint16(h[28:])) + int(binary.LittleEndian.Uint16(h[30:])) + int(binary.LittleEndian.Uint16(h[32:]))
		if _, err := br.Discard(rest); err != nil {
			break
		}
		n++
	}
	return n
}

func safeName(name string) bool {
	if name == "" || strings.ContainsAny(name, "\\\x00") || strings.HasPrefix(name, "/") || len(name) > 1024 {
		return false
	}
	if len(name) >= 2 && name[1] == ':' {
		return false // a Windows drive
	}
	for _, p := range strings.Split(name, "/") {
		if p == ".." {
			return false
		}
	}
	return true
}

// read returns a member whole, at most MaxEntryBytes.
func (z *zipArchive) read(zf *zip.File) (string, error) {
	if zf.UncompressedSize64 > uint64(z.lim.MaxEntryBytes) {
		return "", &EntryError{Ref: zf.Name, Reason: fmt.Sprintf("the file is larger than %d bytes (the import limit)", z.lim.MaxEntryBytes)}
	}
	rc, err := zf.Open()
	if err != nil {
		return "", &EntryError{Ref: zf.Name, Reason: "cannot be read: " + err.Error()}
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, z.lim.MaxEntryBytes+1))
	if err != nil {
		return "", &EntryError{Ref: zf.Name, Reason: "cannot be read: " + err.Error()}
	}
	if int64(len(b)) > z.lim.MaxEntryBytes {
		return "", &EntryError{Ref: zf.Name, Reason: fmt.Sprintf("the file is larger than %d bytes (the import limit)", z.lim.MaxEntryBytes)}
	}
	return string(b), nil
}

// stream opens a member to be read as it goes (a JSON list, a CSV file).
func (z *zipArchive) stream(zf *zip.File) (io.ReadCloser, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, refuse("%s cannot be read: %v", zf.Name, err)
	}
	return rc, nil
}

// names returns the member names matching re, sorted.
func (z *zipArchive) names(re *regexp.Regexp) []string {
	var out []string
	for n := range z.files {
		if re.MatchString(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

var (
	pocketPartRE   = regexp.MustCompile(`(^|/)part_\d+\.csv$`)
	omnivoreMetaRE = regexp.MustCompile(`(^|/)metadata_\d+_to_\d+\.json$`)
	htmlRE         = regexp.MustCompile(`(?i)\.html?$`)
)

// detectZip tells which export a zip is by its members.
func (z *zipArchive) detect() Format {
	switch {
	case z.files["saved_items.json"] != nil && z.files["labels.json"] != nil:
		return Hearth
	case z.files["saved_items/saved_items.json"] != nil || z.files["json/labels.json"] != nil:
		return InboxtZIP
	case len(z.names(omnivoreMetaRE)) > 0:
		return Omnivore
	case len(z.names(pocketPartRE)) > 0:
		return PocketCSV
	case len(z.names(htmlRE)) > 0:
		return InboxtZIP
	}
	return Auto
}

func openZip(f *os.File, size int64, format Format, lim Limits, scan bool) (Reader, Format, error) {
	z, err := checkZip(f, size, lim)
	if err != nil {
		return nil, "", err
	}
	got := z.detect()
	if got == Auto {
		return nil, "", refuse("this zip archive is not an export Hearth can read: %s", supported())
	}
	if format != Auto && format != ZIP && format != got {
		return nil, "", refuse("this zip archive is not a %s export (it looks like %s)", nameOf(format), nameOf(got))
	}
	var r Reader
	switch got {
	case Hearth:
		r, err = newHearthReader(z, scan)
	case InboxtZIP:
		r, err = newInboxtZipReader(z, scan)
	case Omnivore:
		r, err = newOmnivoreReader(z, scan)
	case PocketCSV:
		var q *pocketQuotes
		if q, err = readPocketQuotes(z); err == nil {
			r = &pocketZipReader{z: z, parts: z.names(pocketPartRE), quotes: q}
		}
	}
	if err != nil {
		return nil, "", err
	}
	return &closing{Reader: r, c: f}, got, nil
}

// Label is a label of an export's own list (Hearth's labels.json,
// Inboxt's json/labels.json), with its color when it has one.
type Label struct {
	Name, Color string
}

// LabelLister is implemented by readers of exports that list their labels:
// all of them are created, in their order, also those no item carries.
type LabelLister interface {
	ExportLabels() []Label
}

func readLabels(z *zipArchive, name string) ([]Label, error) {
	zf := z.files[name]
	if zf == nil {
		return nil, nil
	}
	s, err := z.read(zf)
	if err != nil {
		return nil, refuse("%s", err.Error())
	}
	var labels []struct {
		Name  string   `json:"name"`
		Color *string  `json:"color"`
		Order *float64 `json:"order"`
	}
	if err := json.Unmarshal([]byte(s), &labels); err != nil {
		return nil, refuse("%s is not a list of labels (%v)", name, err)
	}
	// Hearth's list has each label's order; Inboxt's is in its order.
	sort.SliceStable(labels, func(i, j int) bool {
		return labels[i].Order != nil && labels[j].Order != nil && *labels[i].Order < *labels[j].Order
	})
	var out []Label
	for _, l := range labels {
		if n := strings.TrimSpace(l.Name); n != "" {
			c := ""
			if l.Color != nil {
				c = *l.Color
			}
			out = append(out, Label{Name: n, Color: c})
		}
	}
	return out, nil
}

// --- Pocket ---

type pocketZipReader struct {
	z      *zipArchive
	parts  []string
	cur    *csvReader
	rc     io.ReadCloser
	quotes *pocketQuotes // annotations/part_*.json, joined to the rows by URL
}

func (p *pocketZipReader) Next() (*Item, error) {
	for {
		if p.cur == nil {
			if len(p.parts) == 0 {
				if it := p.quotes.next(); it != nil {
					return it, nil
				}
				return nil, io.EOF
			}
			name := p.parts[0]
			p.parts = p.parts[1:]
			rc, err := p.z.stream(p.z.files[name])
			if err != nil {
				return nil, err
			}
			c, err := newCSVReader(bufio.NewReaderSize(rc, 64<<10), PocketCSV, p.z.lim, name)
			if err != nil {
				rc.Close()
				return nil, err
			}
			p.cur, p.rc = c, rc
		}
		it, err := p.cur.Next()
		if err == io.EOF {
			p.rc.Close()
			p.cur, p.rc = nil, nil
			continue
		}
		p.quotes.attach(it)
		return it, err
	}
}

func (p *pocketZipReader) Close() error {
	if p.rc != nil {
		return p.rc.Close()
	}
	return nil
}

// --- Hearth ---

// HearthItem is an item of Hearth's saved_items.json: the export
// (handlers/export) writes it and the importer reads it back, by this one
// declaration.
type HearthItem struct {
	ID              string            `json:"id"`
	Type            string            `json:"type"`
	Status          string            `json:"status"`
	Title           string            `json:"title"`
	URL             string            `json:"url,omitempty"`
	SourceDomain    string            `json:"source_domain,omitempty"`
	Description     string            `json:"description,omitempty"`
	Author          string            `json:"author,omitempty"`
	LeadImage       string            `json:"lead_image,omitempty"`
	WordCount       int               `json:"word_count"`
	ReadingProgress float64           `json:"reading_progress"`
	ReadAt          *time.Time        `json:"read_at"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	Labels          []string          `json:"labels"`
	Highlights      []HearthHighlight `json:"highlights"`
	ContentHTML     string            `json:"content_html"`
	ContentText     string            `json:"content_text"`
	// Images are the item's stored images, each with its file under
	// images/<id>/ (exports made before they were listed have none).
	Images []HearthImage `json:"images,omitempty"`
}

// HearthHighlight is a highlight of a HearthItem.
type HearthHighlight struct {
	ID        string                     `json:"id"`
	Text      string                     `json:"text"`
	Note      string                     `json:"note,omitempty"`
	Segments  []library.HighlightSegment `json:"segments"`
	CreatedAt time.Time                  `json:"created_at"`
	UpdatedAt time.Time                  `json:"updated_at"`
}

type hearthReader struct {
	z      *zipArchive
	rc     io.ReadCloser
	a      *jsonArray
	labels []Label
	// images are the zip's images by item id, those no item has taken
	// yet; stray the ones that will be taken by none (images.go).
	images map[string][]imageMember
	stray  strayImages
}

func newHearthReader(z *zipArchive, scan bool) (*hearthReader, error) {
	labels, err := readLabels(z, "labels.json")
	if err != nil {
		return nil, err
	}
	rc, err := z.stream(z.files["saved_items.json"])
	if err != nil {
		return nil, err
	}
	a, err := newJSONArray(bufio.NewReaderSize(rc, 64<<10), z.lim.MaxEntryBytes, "saved_items.json")
	if err != nil {
		rc.Close()
		return nil, err
	}
	h := &hearthReader{z: z, rc: rc, a: a, labels: labels}
	if !scan {
		h.images = zipImages(z, &h.stray)
	}
	return h, nil
}

func (h *hearthReader) ExportLabels() []Label { return h.labels }

func (h *hearthReader) Next() (*Item, error) {
	var e HearthItem
	ref, err := h.a.next(&e)
	if err != nil {
		return nil, err
	}
	it := &Item{Ref: ref, Type: e.Type, URL: e.URL, Title: e.Title, Description: e.Description, Author: e.Author,
		LeadImage: e.LeadImage, WordCount: e.WordCount, ReadingProgress: e.ReadingProgress, ReadAt: e.ReadAt,
		SavedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, Status: e.Status,
		HTML: e.ContentHTML, Text: e.ContentText}
	for _, l := range e.Labels {
		it.Labels = addLabel(it.Labels, l)
	}
	for _, hl := range e.Highlights {
		it.Highlights = append(it.Highlights, Highlight{Quote: hl.Text, Note: hl.Note, Segments: hl.Segments, CreatedAt: hl.CreatedAt, UpdatedAt: hl.UpdatedAt})
	}
	if h.images != nil {
		it.Images = h.itemImages(&e)
	}
	return it, nil
}

func (h *hearthReader) Close() error { return h.rc.Close() }

// --- Inboxt ---

// inboxtItem is SavedItemExportJson (apps/api/src/common/types/index.ts,
// written by modules/export/export.service.ts, Inboxt/inboxt@45f4314).
type inboxtItem struct {
	ID           string  `json:"id"`
	CreatedAt    string  `json:"createdAt"`
	Title        *string `json:"title"`
	OriginalURL  *string `json:"originalUrl"`
	Description  *string `json:"description"`
	LeadImage    *string `json:"leadImage"`
	WordCount    *int    `json:"wordCount"`
	Author       *string `json:"author"`
	Type         string  `json:"type"`
	Status       string  `json:"status"`
	DeletedSince *string `json:"deletedSince"`
	Labels       []struct {
		Name string `json:"name"`
	} `json:"labels"`
	ContentHTML *string `json:"contentHtml"`
	ContentText *string `json:"contentText"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

type inboxtZipReader struct {
	z      *zipArchive
	scan   bool
	rc     io.ReadCloser
	a      *jsonArray
	html   []string // standalone HTML files, after the items
	labels []Label
}

func newInboxtZipReader(z *zipArchive, scan bool) (*inboxtZipReader, error) {
	labels, err := readLabels(z, "json/labels.json")
	if err != nil {
		return nil, err
	}
	r := &inboxtZipReader{z: z, scan: scan, labels: labels}
	// As Inboxt's importZipArchive: every HTML file outside json/,
	// highlights/ and saved_items/ is an item of its own.
	for _, n := range z.names(htmlRE) {
		if !strings.HasPrefix(n, "json/") && !strings.HasPrefix(n, "highlights/") && !strings.HasPrefix(n, "saved_items/") && !strings.HasPrefix(n, "__MACOSX/") {
			r.html = append(r.html, n)
		}
	}
	if zf := z.files["saved_items/saved_items.json"]; zf != nil {
		rc, err := z.stream(zf)
		if err != nil {
			return nil, err
		}
		a, err := newJSONArray(bufio.NewReaderSize(rc, 64<<10), z.lim.MaxEntryBytes, "saved_items/saved_items.json")
		if err != nil {
			rc.Close()
			return nil, err
		}
		r.rc, r.a = rc, a
	}
	return r, nil
}

func (r *inboxtZipReader) ExportLabels() []Label { return r.labels }

func (r *inboxtZipReader) Next() (*Item, error) {
	if r.a != nil {
		var e inboxtItem
		ref, err := r.a.next(&e)
		if err == nil {
			return r.item(ref, &e)
		}
		if err != io.EOF {
			return nil, err
		}
		r.a = nil
	}
	if len(r.html) == 0 {
		return nil, io.EOF
	}
	name := r.html[0]
	r.html = r.html[1:]
	base := strings.TrimSuffix(strings.TrimSuffix(path.Base(name), ".html"), ".htm")
	it := &Item{Ref: name, Title: base, Status: library.StatusActive}
	if regexp.MustCompile(`(?i)newsletter|email`).MatchString(base) {
		it.Type = library.TypeNewsletter
	}
	if r.scan {
		return it, nil
	}
	html, err := r.z.read(r.z.files[name])
	if err != nil {
		return nil, err
	}
	it.HTML = html
	it.URL = canonicalURL(html)
	if it.URL == "" && it.Type != library.TypeNewsletter {
		return nil, &EntryError{Ref: name, Reason: "the HTML file names no address (no canonical link or og:url); Hearth keeps articles by their URL"}
	}
	return it, nil
}

func (r *inboxtZipReader) item(ref string, e *inboxtItem) (*Item, error) {
	if e.Type != library.TypeArticle && e.Type != library.TypeNewsletter {
		return nil, &EntryError{Ref: ref, Reason: fmt.Sprintf("unknown item type %q", e.Type)}
	}
	it := &Item{Ref: ref, Type: e.Type, URL: str(e.OriginalURL), Title: str(e.Title), Description: str(e.Description),
		Author: str(e.Author), LeadImage: str(e.LeadImage), Status: e.Status, SavedAt: dateOf(e.CreatedAt),
		HTML: str(e.ContentHTML), Text: str(e.ContentText)}
	if e.WordCount != nil {
		it.WordCount = *e.WordCount
	}
	for _, l := range e.Labels {
		it.Labels = addLabel(it.Labels, l.Name)
	}
	if e.ID != "" && safeName(e.ID) && !strings.Contains(e.ID, "/") && !r.scan {
		dir := "saved_items/" + e.ID + "/"
		if zf := r.z.files[dir+"content.html"]; zf != nil {
			if html, err := r.z.read(zf); err == nil && html != "" {
				it.HTML = html
			}
		}
		if zf := r.z.files[dir+"highlights.json"]; zf != nil {
			s, err := r.z.read(zf)
			if err != nil {
				return nil, err
			}
			var hs []struct {
				Text      string `json:"text"`
				CreatedAt string `json:"createdAt"`
			}
			if err := json.Unmarshal([]byte(s), &hs); err != nil {
				return nil, &EntryError{Ref: zf.Name, Reason: "not a list of highlights: " + err.Error()}
			}
			for _, h := range hs {
				if strings.TrimSpace(h.Text) != "" {
					it.Highlights = append(it.Highlights, Highlight{Quote: h.Text, CreatedAt: dateOf(h.CreatedAt)})
				}
			}
		}
	}
	return it, nil
}

func (r *inboxtZipReader) Close() error {
	if r.rc != nil {
		return r.rc.Close()
	}
	return nil
}

var (
	canonicalRE = regexp.MustCompile(`(?is)<link\s[^>]*rel=["']?canonical["']?[^>]*>`)
	ogURLRE     = regexp.MustCompile(`(?is)<meta\s[^>]*property=["']?og:url["']?[^>]*>`)
	hrefRE      = regexp.MustCompile(`(?is)\b(?:href|content)=["']([^"']+)["']`)
)

// canonicalURL is the page's own address from its canonical link or og:url.
func canonicalURL(html string) string {
	for _, re := range []*regexp.Regexp{canonicalRE, ogURLRE} {
		if tag := re.FindString(html); tag != "" {
			if m := hrefRE.FindStringSubmatch(tag); m != nil && (strings.HasPrefix(m[1], "http://") || strings.HasPrefix(m[1], "https://")) {
				return m[1]
			}
		}
	}
	return ""
}

// --- Omnivore ---

// omnivoreItem is an element of metadata_<from>_to_<to>.json, as Omnivore's
// exporter writes it (packages/api/src/jobs/export.ts uploadToBucket,
// omnivore-app/omnivore@322ce62b); its content is content/<slug>.html and
// its highlights highlights/<slug>.md.
type omnivoreItem struct {
	ID              string     `json:"id"`
	Slug            string     `json:"slug"`
	Title           string     `json:"title"`
	Description     string     `json:"description"`
	Author          string     `json:"author"`
	URL             string     `json:"url"`
	State           string     `json:"state"`
	ReadingProgress flexNumber `json:"readingProgress"`
	Thumbnail       string     `json:"thumbnail"`
	Labels          []string   `json:"labels"`
	SavedAt         string     `json:"savedAt"`
	UpdatedAt       string     `json:"updatedAt"`
	PublishedAt     *string    `json:"publishedAt"`
}

type omnivoreReader struct {
	z     *zipArchive
	scan  bool
	metas []string
	rc    io.ReadCloser
	a     *jsonArray
}

func newOmnivoreReader(z *zipArchive, scan bool) (*omnivoreReader, error) {
	metas := z.names(omnivoreMetaRE)
	// metadata_0_to_20.json, metadata_20_to_40.json...: by their first number.
	sort.SliceStable(metas, func(i, j int) bool { return firstNumber(metas[i]) < firstNumber(metas[j]) })
	return &omnivoreReader{z: z, scan: scan, metas: metas}, nil
}

func firstNumber(name string) int {
	var n int
	fmt.Sscanf(path.Base(name), "metadata_%d_", &n)
	return n
}

func (o *omnivoreReader) Next() (*Item, error) {
	for {
		if o.a == nil {
			if len(o.metas) == 0 {
				return nil, io.EOF
			}
			name := o.metas[0]
			o.metas = o.metas[1:]
			rc, err := o.z.stream(o.z.files[name])
			if err != nil {
				return nil, err
			}
			a, err := newJSONArray(bufio.NewReaderSize(rc, 64<<10), o.z.lim.MaxEntryBytes, name)
			if err != nil {
				rc.Close()
				return nil, err
			}
			o.rc, o.a = rc, a
		}
		var e omnivoreItem
		ref, err := o.a.next(&e)
		if err == io.EOF {
			o.rc.Close()
			o.rc, o.a = nil, nil
			continue
		}
		if err != nil {
			return nil, err
		}
		return o.item(ref, &e)
	}
}

func (o *omnivoreReader) item(ref string, e *omnivoreItem) (*Item, error) {
	if e.URL == "" {
		return nil, &EntryError{Ref: ref, Reason: "the item has no url"}
	}
	it := &Item{Ref: ref, URL: e.URL, Title: e.Title, Description: e.Description, Author: e.Author,
		LeadImage: e.Thumbnail, SavedAt: dateOf(e.SavedAt), UpdatedAt: dateOf(e.UpdatedAt),
		ReadingProgress: float64(e.ReadingProgress), Status: library.StatusActive}
	if strings.EqualFold(e.State, "Archived") {
		it.Status = library.StatusArchived
	}
	for _, l := range e.Labels {
		it.Labels = addLabel(it.Labels, l)
	}
	if o.scan || e.Slug == "" || !safeName(e.Slug) || strings.Contains(e.Slug, "/") {
		return it, nil
	}
	if zf := o.z.files["content/"+e.Slug+".html"]; zf != nil {
		html, err := o.z.read(zf)
		if err != nil {
			return nil, err
		}
		it.HTML = html
	}
	if zf := o.z.files["highlights/"+e.Slug+".md"]; zf != nil {
		md, err := o.z.read(zf)
		if err != nil {
			return nil, err
		}
		it.Highlights = omnivoreHighlights(md)
	}
	return it, nil
}

func (o *omnivoreReader) Close() error {
	if o.rc != nil {
		return o.rc.Close()
	}
	return nil
}

var omnivoreTagsRE = regexp.MustCompile(`^(#\S+\s*)+$`)

// omnivoreHighlights reads highlights/<slug>.md as Omnivore's
// highlightToMarkdown writes it (packages/api/src/utils/parser.ts,
// omnivore-app/omnivore@322ce62b): highlights joined by blank lines, each
// "> quote " (blank lines inside the quote turned into "> "), then a blank
// line and "#label ..." when it has labels, then a blank line and the note.
// A note without a quote (Omnivore's "note" highlights) has no passage
// and is not kept.
func omnivoreHighlights(md string) []Highlight {
	var out []Highlight
	var notes [][]string // each highlight's note paragraphs, joined once
	for _, block := range strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n\n") {
		b := strings.TrimSpace(block)
		switch {
		case b == "":
		case strings.HasPrefix(b, ">"):
			lines := strings.Split(b, "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(strings.TrimPrefix(l, ">"), " ")
			}
			out = append(out, Highlight{Quote: strings.TrimSpace(strings.Join(lines, "\n"))})
			notes = append(notes, nil)
		case omnivoreTagsRE.MatchString(b):
			// the highlight's labels: Hearth's highlights have none
		case len(out) > 0:
			notes[len(out)-1] = append(notes[len(out)-1], b)
		}
	}
	for i := range out {
		out[i].Note = strings.Join(notes[i], "\n\n")
	}
	return out
}
