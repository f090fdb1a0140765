// Package importer reads the export files of other read-it-later services
// (Pocket with its highlights, Omnivore, Raindrop, Readwise Reader and
// Readwise's highlights, Matter, GoodLinks, Karakeep, Linkwarden, Inboxt,
// wallabag, Instapaper, browsers' bookmark files; docs/import.md lists what
// each keeps) and Hearth's own export, one entry at a time, as Items a
// member's store can take. It never holds a whole file in memory: CSV rows,
// JSON array elements and zip members are read as they come, each within
// Limits.
//
// Scan checks a staged file before anything is written (its format, that it
// is an export at all, zip bombs, path traversal, the entry count); Open
// then reads its entries. Runner (runner.go) turns a staged file into an
// import job in the store and carries it out in the background, resuming
// after a restart where it stopped. Uploads (upload.go) is the HTTP side:
// POST /api/import as Inboxt's web app sends a file, and the Import
// settings page.
package importer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Format names an export format, as the import form and API take it.
type Format string

// Formats. Auto, CSV and ZIP are choices for the caller (detect; detect
// among CSV files; among zip files, as Inboxt's CSV and ZIP_ARCHIVE
// types); Scan resolves them to one of the others.
const (
	Auto       Format = ""
	CSV        Format = "CSV"         // Inboxt's import type: any CSV format below
	ZIP        Format = "ZIP_ARCHIVE" // Inboxt's import type: any zip format below
	Hearth     Format = "HEARTH"      // Hearth's export (zip: labels.json, saved_items.json)
	InboxtCSV  Format = "INBOXT_CSV"  // name,url,description,date,labels (and the columns Inboxt reads)
	InboxtZIP  Format = "INBOXT_ZIP"  // Inboxt's export, or any zip of HTML files
	PocketCSV  Format = "POCKET"      // Pocket's zip of part_*.csv, or one of its CSV files
	PocketHTML Format = "POCKET_HTML" // Pocket's older ril_export.html
	Omnivore   Format = "OMNIVORE"    // zip: metadata_*.json, content/*.html, highlights/*.md
	Wallabag   Format = "WALLABAG"    // wallabag's JSON export
	Instapaper Format = "INSTAPAPER"  // URL,Title,Selection,Folder,Timestamp[,Tags]
	Bookmarks  Format = "BOOKMARKS"   // Netscape bookmark file (browsers, Raindrop, Pinboard...)
)

// Formats lists the concrete formats, in the order the import page shows them.
var Formats = []Format{PocketCSV, PocketHTML, Omnivore, Raindrop, ReadwiseReader, ReadwiseHighlight, Matter, GoodLinks, Karakeep, Linkwarden, InboxtCSV, InboxtZIP, Wallabag, Instapaper, Bookmarks, Hearth}

// ParseFormat returns the format named s (case-insensitive; "" is Auto).
func ParseFormat(s string) (Format, error) {
	f := Format(strings.ToUpper(strings.TrimSpace(s)))
	switch f {
	case Auto, CSV, ZIP:
		return f, nil
	}
	for _, k := range Formats {
		if f == k {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown import type %q: use one of CSV, ZIP_ARCHIVE, %s, or none to detect it", s, joinFormats(Formats))
}

func joinFormats(fs []Format) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// Describe is one line on what f is, for the import page.
func Describe(f Format) string {
	switch f {
	case PocketCSV:
		return "Pocket: the zip Pocket e-mailed (part_*.csv, annotations/part_*.json), or one CSV from it"
	case PocketHTML:
		return "Pocket (before 2024): ril_export.html"
	case Omnivore:
		return "Omnivore: the export zip (metadata, content, highlights)"
	case InboxtCSV:
		return "Inboxt CSV: name, url, description, date, labels"
	case InboxtZIP:
		return "Inboxt: its export zip, or any zip of HTML files"
	case Wallabag:
		return "wallabag: the JSON export"
	case Instapaper:
		return "Instapaper: the CSV export"
	case Bookmarks:
		return "Bookmarks: an HTML bookmark file from a browser, Raindrop, Pinboard..."
	case Hearth:
		return "Hearth: another Hearth site's export zip"
	case Raindrop:
		return "Raindrop: the CSV backup"
	case ReadwiseReader:
		return "Readwise Reader: the CSV export"
	case ReadwiseHighlight:
		return "Readwise: the highlights CSV"
	case Matter:
		return "Matter: the CSV export"
	case GoodLinks:
		return "GoodLinks: the JSON export"
	case Karakeep:
		return "Karakeep: the JSON export"
	case Linkwarden:
		return "Linkwarden: the JSON backup"
	}
	return string(f)
}

// Limits bound what an import may read. Zero fields take the defaults.
type Limits struct {
	// MaxUploadBytes bounds the uploaded file (default 256 MiB).
	MaxUploadBytes int64
	// MaxEntries bounds the items in one file (default 100,000).
	MaxEntries int
	// MaxEntryBytes bounds one entry: a zip member read whole (an HTML
	// page, a metadata file), a CSV row, one element of a JSON array
	// (default 16 MiB).
	MaxEntryBytes int64
	// MaxCompressionRatio bounds how much a zip member may expand: a
	// member larger than 1 MiB uncompressed may be at most this many times
	// its compressed size (default 100; text compresses 5 to 20 times).
	MaxCompressionRatio int
}

// Defaults of Limits.
const (
	DefaultMaxUploadBytes      int64 = 256 << 20
	DefaultMaxEntries                = 100_000
	DefaultMaxEntryBytes       int64 = 16 << 20
	DefaultMaxCompressionRatio       = 100
)

// WithDefaults fills in the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxUploadBytes <= 0 {
		l.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if l.MaxCompressionRatio <= 0 {
		l.MaxCompressionRatio = DefaultMaxCompressionRatio
	}
	return l
}

// Item is one saved item read from an export.
type Item struct {
	// Ref says where in the file the item is (a row, a file name), for
	// failure reports.
	Ref             string
	Type            string // library.TypeArticle (default) or TypeNewsletter
	URL             string
	Title           string
	Description     string
	Author          string
	LeadImage       string
	SavedAt         time.Time // zero: unknown (the import time is used)
	UpdatedAt       time.Time // zero: SavedAt
	ReadAt          *time.Time
	Status          string // library.StatusActive (default), StatusArchived, StatusDeleted
	ReadingProgress float64
	WordCount       int
	Labels          []string
	Highlights      []Highlight
	HTML, Text      string // the content, when the export carries it
	// ByTitle: the export names the item by its title only (Readwise's
	// highlights), so it goes to the member's item of that title.
	ByTitle bool
	// Images are the images the export carries for the item (read from
	// the reader, an ImageSource, once the item is written).
	Images []ImageFile
}

// Highlight is a highlighted passage with its note. Exports that keep no
// position (Omnivore's Markdown, Inboxt's highlights.json) give only
// Quote; Segments then stay empty and the store places it (see
// library.ImportItem). Without Quote and Segments, it is the item's note
// (a note on the item as a whole).
type Highlight struct {
	Quote     string
	Note      string
	Segments  []library.HighlightSegment
	CreatedAt time.Time
	UpdatedAt time.Time
}

// EntryError is a malformed entry: reported with its place and skipped,
// never stopping the rest.
type EntryError struct {
	Ref, Reason string
}

func (e *EntryError) Error() string { return e.Ref + ": " + e.Reason }

// FileError is a file refused as a whole (not an export, a zip bomb, too
// many entries...): nothing is written. Its message is for the member.
type FileError struct{ Msg string }

func (e *FileError) Error() string { return e.Msg }

func refuse(format string, a ...any) error { return &FileError{Msg: fmt.Sprintf(format, a...)} }

// IsFileError reports whether err refuses a file.
func IsFileError(err error) bool {
	var fe *FileError
	return errors.As(err, &fe)
}

// Reader reads a file's entries in order. Next returns io.EOF after the
// last; an *EntryError for an entry that is skipped; any other error stops
// the file (it could not be read any further).
type Reader interface {
	Next() (*Item, error)
	Close() error
}

// Scan checks the file at path before anything is written: that it is an
// export of format (detected when Auto, CSV or ZIP), that a zip is safe
// to read (no path traversal, no member expanding past the limits), and
// that it holds 1 to MaxEntries entries, at least one of them an item. It returns the resolved format
// and the number of entries (malformed ones included). Its errors are
// *FileError, or I/O errors.
func Scan(path string, format Format, lim Limits) (Format, int, error) {
	r, f, err := open(path, format, lim, true)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	n, ok := 0, 0
	var first *EntryError
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		var ee *EntryError
		switch {
		case errors.As(err, &ee):
			if first == nil {
				first = ee
			}
		case err != nil:
			return "", 0, err
		default:
			ok++
		}
		n++
		if n > lim.WithDefaults().MaxEntries {
			return "", 0, refuse("the file has more than %d entries (the import limit); split it", lim.WithDefaults().MaxEntries)
		}
	}
	if n == 0 {
		return "", 0, refuse("the file holds no saved items (%s)", Describe(f))
	}
	if ok == 0 {
		// Not one entry reads as an item: not this export after all.
		return "", 0, refuse("no entry of the file reads as a saved item of %s (%s)", nameOf(f), first.Error())
	}
	return f, n, nil
}

// Open reads the entries of the file at path, of a format Scan resolved.
func Open(path string, format Format, lim Limits) (Reader, error) {
	r, _, err := open(path, format, lim, false)
	return r, err
}

func open(path string, format Format, lim Limits, scan bool) (Reader, Format, error) {
	lim = lim.WithDefaults()
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, "", err
	}
	if st.Size() > lim.MaxUploadBytes {
		f.Close()
		return nil, "", refuse("the file is larger than %d bytes (the import limit)", lim.MaxUploadBytes)
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		f.Close()
		return nil, "", err
	}
	head = head[:n]
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, "", err
	}
	if bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")) {
		if format != Auto && format != ZIP && !isZipFormat(format) {
			f.Close()
			return nil, "", refuse("the file is a zip archive, not a %s file", format)
		}
		r, got, err := openZip(f, st.Size(), format, lim, scan)
		if err != nil {
			f.Close()
			return nil, "", err
		}
		return r, got, nil
	}
	if format == ZIP || isZipFormat(format) && format != PocketCSV {
		f.Close()
		return nil, "", refuse("the file is not a zip archive; the %s export is one", nameOf(format))
	}
	got := format
	if got == Auto || got == CSV || got == PocketCSV {
		d := detectText(head)
		if format == CSV && !isCSVFormat(d) || format == PocketCSV && d != PocketCSV || d == Auto {
			f.Close()
			if format == Auto {
				return nil, "", refuse("this file is not an export Hearth can read: %s", supported())
			}
			return nil, "", refuse("this file is not a %s export", nameOf(format))
		}
		got = d
	}
	var r Reader
	body := bufio.NewReaderSize(f, 64<<10)
	switch got {
	case InboxtCSV, PocketCSV, Instapaper, Raindrop, ReadwiseReader, Matter:
		r, err = newCSVReader(body, got, lim, "")
	case ReadwiseHighlight:
		var c *csvReader
		if c, err = newCSVReader(body, got, lim, ""); err == nil {
			r = &groupingReader{Reader: c}
		}
	case GoodLinks, Karakeep, Linkwarden:
		r, err = newServiceJSONReader(body, got, lim)
	case PocketHTML, Bookmarks:
		r, err = newAnchorReader(body, got, lim)
	case Wallabag:
		r, err = newWallabagReader(body, lim)
	default:
		err = refuse("this file is not a %s export", nameOf(got))
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return &closing{Reader: r, c: f}, got, nil
}

func supported() string {
	return "Pocket (zip, CSV or HTML), Omnivore (zip), Raindrop (CSV), Readwise Reader (CSV), Readwise highlights (CSV), Matter (CSV), GoodLinks (JSON), Karakeep (JSON), Linkwarden (JSON), Inboxt (CSV or zip), wallabag (JSON), Instapaper (CSV), browser bookmarks (HTML) or Hearth (zip)"
}

func nameOf(f Format) string {
	switch f {
	case ZIP:
		return "zip"
	case CSV:
		return "CSV"
	}
	return strings.SplitN(Describe(f), ":", 2)[0]
}

func isZipFormat(f Format) bool {
	return f == Hearth || f == InboxtZIP || f == Omnivore || f == PocketCSV
}

func isCSVFormat(f Format) bool {
	switch f {
	case InboxtCSV, PocketCSV, Instapaper, Raindrop, ReadwiseReader, ReadwiseHighlight, Matter:
		return true
	}
	return false
}

// closing closes c after its Reader.
type closing struct {
	Reader
	c io.Closer
}

// ExportLabels passes on the wrapped reader's list of labels.
func (c *closing) ExportLabels() []Label {
	if ll, ok := c.Reader.(LabelLister); ok {
		return ll.ExportLabels()
	}
	return nil
}

func (c *closing) Close() error {
	err := c.Reader.Close()
	if cerr := c.c.Close(); err == nil {
		err = cerr
	}
	return err
}

// detectText recognises a text export from its first bytes.
func detectText(head []byte) Format {
	h := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	t := bytes.TrimLeft(h, " \t\r\n")
	lower := bytes.ToLower(t)
	switch {
	case bytes.HasPrefix(t, []byte("[")) || bytes.HasPrefix(t, []byte("{")):
		return detectJSON(t)
	case bytes.HasPrefix(lower, []byte("<!doctype netscape-bookmark-file")):
		return Bookmarks
	case bytes.HasPrefix(lower, []byte("<")):
		if bytes.Contains(lower, []byte("<title>pocket export</title>")) {
			return PocketHTML
		}
		if bytes.Contains(lower, []byte("<dl")) && bytes.Contains(lower, []byte("<a ")) {
			return Bookmarks
		}
		return Auto
	}
	line, _, _ := bytes.Cut(h, []byte("\n"))
	cols := splitHeader(string(bytes.TrimRight(line, "\r")))
	if f := detectServiceCSV(cols); f != Auto {
		return f
	}
	switch {
	case hasCols(cols, "title", "url", "time_added"):
		return PocketCSV
	case len(cols) >= 4 && cols[0] == "URL" && cols[1] == "Title" && cols[2] == "Selection" && cols[3] == "Folder":
		return Instapaper
	case hasCols(cols, "url") || hasCols(cols, "URL"):
		return InboxtCSV
	}
	return Auto
}

// splitHeader splits a CSV header line (names are rarely quoted).
func splitHeader(line string) []string {
	parts := strings.Split(line, ",")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"`)
	}
	return parts
}

func hasCols(cols []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, c := range cols {
			if c == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// unixTime reads Unix seconds ("" or bad: zero time).
func unixTime(s string) time.Time {
	s = strings.TrimSpace(s)
	// Only a positive number in its plain decimal form (no sign, leading
	// zeros or base prefix); strconv, not fmt, which allocates for every
	// date an export writes.
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// dateLayouts are the date forms exports write (ISO 8601 in its
// variants, wallabag's +0200 offsets, plain dates).
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05-0700",
	"2006-01-02T15:04:05Z0700",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02",
	time.RFC1123Z,
	time.RFC1123,
}

// parseDate reads a date in one of dateLayouts or as Unix seconds.
func parseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	if t := unixTime(s); !t.IsZero() {
		return t, true
	}
	for _, l := range dateLayouts {
		if !layoutMayFit(l, s) {
			continue
		}
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// layoutMayFit is false when s cannot be in layout l (one of dateLayouts)
// for its length or the byte that follows the date: time.Parse's error for
// a layout tried in vain is allocated, once per layout before the one that
// fits, for every date of an export. The year, month and day each take a
// fixed number of digits, so the separator is s[10]; the first layout that
// parses s is the same as without this check.
func layoutMayFit(l, s string) bool {
	switch {
	case strings.HasPrefix(l, "Mon,"):
		return len(s) > 3 && s[3] == ','
	case len(l) == 10:
		return len(s) == 10
	default:
		return len(s) > 10 && s[10] == l[10]
	}
}

// splitLabels splits a label list on any of seps, trimmed, without empty
// names or repeats, at most library.MaxLabels of them (see addLabel).
func splitLabels(s, seps string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if out = addLabel(out, p); len(out) >= library.MaxLabels {
			break
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// addLabel appends name unless it is there already or list has
// library.MaxLabels names (a member has no more labels; and each name is
// compared with every one kept, so the list must stay short).
func addLabel(list []string, name string) []string {
	name = strings.TrimSpace(name)
	if name == "" || len(list) >= library.MaxLabels || containsFold(list, name) {
		return list
	}
	return append(list, name)
}
