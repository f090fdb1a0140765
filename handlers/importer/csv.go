package importer

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// CSV exports, read by their header (columns in any order):
//
//   - Pocket (its e-mailed export since 2024, part_*.csv in a zip): title,
//     url, time_added (Unix seconds), cursor (newer files), tags separated
//     by "|", status (unread or archive). As wallabag reads them:
//     src/Import/PocketCsvImport.php, wallabag/wallabag@5afc37df.
//   - Instapaper: URL, Title, Selection, Folder, Timestamp and, in newer
//     files, Tags; Folder is Unread, Archive, Starred or the member's own
//     folder (a label here), as wallabag's src/Import/InstapaperImport.php.
//   - Inboxt: name, url, description, date, labels (comma-separated), and
//     the other columns its importer reads (title, URL, Title, Selection,
//     created, "Saved date", Timestamp, tags, Tags):
//     apps/api/src/modules/import/import.service.ts importCsvFile,
//     Inboxt/inboxt@45f4314.

type csvReader struct {
	r      *csv.Reader
	lim    *limitedSince
	format Format
	prefix string // the file's name in a zip, for refs
	cols   map[string]int
	row    int
	end    int64 // input offset after the last row
}

func newCSVReader(body io.Reader, format Format, lim Limits, prefix string) (*csvReader, error) {
	ls := &limitedSince{r: body, max: lim.MaxEntryBytes}
	r := csv.NewReader(ls)
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.ReuseRecord = false
	ls.consumed = r.InputOffset
	head, err := r.Read()
	if err != nil {
		if errors.Is(err, errEntryTooLarge) {
			return nil, refuse("%sthe CSV header is longer than %d bytes", where(prefix), lim.MaxEntryBytes)
		}
		return nil, refuse("%sthe file is not a CSV export (%v)", where(prefix), err)
	}
	c := &csvReader{r: r, lim: ls, format: format, prefix: prefix, cols: map[string]int{}, end: r.InputOffset()}
	for i, h := range head {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := c.cols[h]; !dup {
			c.cols[h] = i
		}
	}
	if _, ok := c.col([]string{"url", "URL"}, nil); !ok && format != ReadwiseHighlight {
		return nil, refuse("%sthe CSV file has no url column", where(prefix))
	}
	return c, nil
}

func where(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + ": "
}

// col returns the first of names the header has, in rec.
func (c *csvReader) col(names []string, rec []string) (string, bool) {
	for _, n := range names {
		if i, ok := c.cols[n]; ok {
			if i < len(rec) {
				return strings.TrimSpace(rec[i]), true
			}
			return "", rec == nil
		}
	}
	return "", false
}

func (c *csvReader) get(rec []string, names ...string) string {
	v, _ := c.col(names, rec)
	return v
}

func (c *csvReader) Next() (*Item, error) {
	for {
		rec, err := c.r.Read()
		if err == io.EOF {
			return nil, io.EOF
		}
		c.row++
		ref := fmt.Sprintf("%srow %d", c.prefix+" ", c.row)
		ref = strings.TrimSpace(ref)
		if err != nil {
			if errors.Is(err, errEntryTooLarge) {
				return nil, refuse("%sa CSV row is longer than %d bytes (the import limit)", where(c.prefix), c.lim.max)
			}
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &EntryError{Ref: ref, Reason: "malformed CSV row: " + pe.Err.Error()}
			}
			return nil, err
		}
		start := c.end
		c.end = c.r.InputOffset()
		if c.end-start > c.lim.max {
			return nil, refuse("%sa CSV row is longer than %d bytes (the import limit)", where(c.prefix), c.lim.max)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			c.row--
			continue // blank line
		}
		it, err := c.item(rec)
		if err != nil {
			return nil, &EntryError{Ref: ref, Reason: err.Error()}
		}
		it.Ref = ref
		return it, nil
	}
}

func (c *csvReader) item(rec []string) (*Item, error) {
	if it, ok, err := c.serviceItem(rec); ok {
		if err == nil && it.URL == "" && !it.ByTitle {
			err = errors.New("the row has no URL")
		}
		return it, err
	}
	it := &Item{Status: library.StatusActive}
	switch c.format {
	case PocketCSV:
		it.URL = c.get(rec, "url")
		it.Title = c.get(rec, "title")
		it.SavedAt = unixTime(c.get(rec, "time_added"))
		it.Labels = splitLabels(c.get(rec, "tags"), "|")
		switch strings.ToLower(c.get(rec, "status")) {
		case "archive", "archived", "read":
			it.Status = library.StatusArchived
		}
	case Instapaper:
		it.URL = c.get(rec, "URL")
		it.Title = c.get(rec, "Title")
		it.Description = c.get(rec, "Selection")
		it.SavedAt = unixTime(c.get(rec, "Timestamp"))
		switch folder := c.get(rec, "Folder"); folder {
		case "Unread", "":
		case "Archive":
			it.Status = library.StatusArchived
		case "Starred":
			it.Labels = addLabel(it.Labels, "Starred")
		default:
			it.Labels = addLabel(it.Labels, folder)
		}
		for _, l := range jsonOrSplitLabels(c.get(rec, "Tags")) {
			it.Labels = addLabel(it.Labels, l)
		}
	default: // Inboxt's CSV
		it.URL = c.get(rec, "url", "URL")
		it.Title = c.get(rec, "title", "name", "Title")
		it.Description = c.get(rec, "description", "Selection")
		if d := c.get(rec, "date", "created", "Saved date"); d != "" {
			t, ok := parseDate(d)
			if !ok {
				return nil, fmt.Errorf("the date %q is not a date", clipString(d, 40))
			}
			it.SavedAt = t
		} else {
			it.SavedAt = unixTime(c.get(rec, "Timestamp"))
		}
		it.Labels = jsonOrSplitLabels(c.get(rec, "labels", "tags", "Tags"))
	}
	if it.URL == "" {
		return nil, errors.New("the row has no URL")
	}
	return it, nil
}

// jsonOrSplitLabels reads a label list as Inboxt's extractCsvLabels does:
// a JSON array of names, or names separated by commas or semicolons.
func jsonOrSplitLabels(s string) []string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		var names []string
		if json.Unmarshal([]byte(s), &names) != nil {
			return nil
		}
		var out []string
		for _, n := range names {
			out = addLabel(out, n)
		}
		return out
	}
	return splitLabels(s, ",;")
}

func (c *csvReader) Close() error { return nil }

func clipString(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// errEntryTooLarge is returned by limitedSince past its bound.
var errEntryTooLarge = errors.New("entry too large")

// limitedSince reads r, failing once more than max bytes were read since
// the end of the last entry its parser finished (consumed): a CSV row, a
// JSON value. The parser never buffers more than one entry plus this.
type limitedSince struct {
	r        io.Reader
	max      int64
	read     int64
	consumed func() int64
}

func (l *limitedSince) Read(p []byte) (int, error) {
	if l.consumed != nil && l.read-l.consumed() > l.max {
		return 0, errEntryTooLarge
	}
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}
