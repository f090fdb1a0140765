package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// jsonArray reads the elements of a top-level JSON array one at a time,
// each at most lim bytes: a syntax error stops the file, an element of the
// wrong shape is an EntryError.
type jsonArray struct {
	dec  *json.Decoder
	lim  *limitedSince
	name string // the file's name, for refs
	n    int
	done bool
}

// limitedJSON decodes r, failing on a value over max bytes (limitedSince).
func limitedJSON(r io.Reader, max int64) (*json.Decoder, *limitedSince) {
	ls := &limitedSince{r: r, max: max}
	dec := json.NewDecoder(ls)
	ls.consumed = dec.InputOffset
	return dec, ls
}

func newJSONArray(r io.Reader, max int64, name string) (*jsonArray, error) {
	dec, ls := limitedJSON(r, max)
	tok, err := dec.Token()
	if err != nil {
		return nil, refuse("%sthe file is not JSON", where(name))
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, refuse("%sthe file is not a JSON list of items", where(name))
	}
	return &jsonArray{dec: dec, lim: ls, name: name}, nil
}

// next decodes the next element into v (ref names it); io.EOF after the last.
func (j *jsonArray) next(v any) (ref string, err error) {
	if j.done || !j.dec.More() {
		if !j.done {
			j.done = true
			if _, err := j.dec.Token(); err != nil { // the closing ]
				return "", refuse("%sthe JSON list is cut short", where(j.name))
			}
		}
		return "", io.EOF
	}
	j.n++
	ref = fmt.Sprintf("%sitem %d", j.name+" ", j.n)
	ref = strings.TrimSpace(ref)
	var raw json.RawMessage
	if err := j.dec.Decode(&raw); err != nil {
		if errors.Is(err, errEntryTooLarge) {
			return ref, refuse("%s is larger than %d bytes (the import limit)", ref, j.lim.max)
		}
		return ref, refuse("%s: the JSON is malformed (%v)", ref, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return ref, &EntryError{Ref: ref, Reason: "the entry does not have the export's shape: " + err.Error()}
	}
	return ref, nil
}

// flexBool is a JSON boolean, or 0/1, or "0"/"1".
type flexBool bool

func (b *flexBool) UnmarshalJSON(d []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(d)), `"`)
	switch s {
	case "true", "1":
		*b = true
	case "false", "0", "", "null":
		*b = false
	default:
		return fmt.Errorf("%s is not a boolean", s)
	}
	return nil
}

// flexString is a JSON string or number (ids).
type flexString string

func (f *flexString) UnmarshalJSON(d []byte) error {
	d = bytes.TrimSpace(d)
	if len(d) > 0 && d[0] == '"' {
		var s string
		if err := json.Unmarshal(d, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	if string(d) == "null" {
		*f = ""
		return nil
	}
	*f = flexString(d)
	return nil
}

// flexNumber is a JSON number or a numeric string.
type flexNumber float64

func (f *flexNumber) UnmarshalJSON(d []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(d)), `"`)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("%s is not a number", s)
	}
	*f = flexNumber(v)
	return nil
}

func dateOf(s string) time.Time {
	t, _ := parseDate(s)
	return t
}

// --- wallabag ---

// wallabagEntry is an entry of wallabag's JSON export: Entry's properties
// in the export_all group (src/Entity/Entry.php, Annotation.php,
// wallabag/wallabag@5afc37df; tests/fixtures/Import/wallabag-v2.json).
type wallabagEntry struct {
	ID             flexString `json:"id"`
	Title          string     `json:"title"`
	URL            string     `json:"url"`
	IsArchived     flexBool   `json:"is_archived"`
	IsStarred      flexBool   `json:"is_starred"`
	CreatedAt      string     `json:"created_at"`
	UpdatedAt      string     `json:"updated_at"`
	ArchivedAt     string     `json:"archived_at"`
	Content        string     `json:"content"`
	PreviewPicture string     `json:"preview_picture"`
	Tags           []string   `json:"tags"`
	Annotations    []struct {
		Text      string `json:"text"`
		Quote     string `json:"quote"`
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
		Ranges    []struct {
			Start       string     `json:"start"`
			End         string     `json:"end"`
			StartOffset flexNumber `json:"startOffset"`
			EndOffset   flexNumber `json:"endOffset"`
		} `json:"ranges"`
	} `json:"annotations"`
}

type wallabagReader struct{ a *jsonArray }

func newWallabagReader(body io.Reader, lim Limits) (*wallabagReader, error) {
	a, err := newJSONArray(body, lim.MaxEntryBytes, "")
	if err != nil {
		return nil, err
	}
	return &wallabagReader{a: a}, nil
}

func (w *wallabagReader) Next() (*Item, error) {
	var e wallabagEntry
	ref, err := w.a.next(&e)
	if err != nil {
		return nil, err
	}
	if e.URL == "" {
		return nil, &EntryError{Ref: ref, Reason: "the entry has no url (is this a wallabag export?)"}
	}
	it := &Item{Ref: ref, URL: e.URL, Title: e.Title, LeadImage: e.PreviewPicture, Status: library.StatusActive,
		SavedAt: dateOf(e.CreatedAt), UpdatedAt: dateOf(e.UpdatedAt)}
	if e.IsArchived {
		it.Status = library.StatusArchived
		if t, ok := parseDate(e.ArchivedAt); ok {
			it.ReadAt = &t
		}
	}
	for _, t := range e.Tags {
		it.Labels = addLabel(it.Labels, t)
	}
	if e.IsStarred {
		it.Labels = addLabel(it.Labels, "Starred")
	}
	// wallabag keeps "Oh, what a shame, no content" style placeholders
	// when it could not fetch a page: that is content it has, kept.
	it.HTML = e.Content
	for _, a := range e.Annotations {
		h := Highlight{Quote: a.Quote, Note: a.Text, CreatedAt: dateOf(a.CreatedAt), UpdatedAt: dateOf(a.UpdatedAt)}
		for _, r := range a.Ranges {
			if r.Start == "" {
				continue
			}
			h.Segments = append(h.Segments, library.HighlightSegment{XPath: r.Start, StartOffset: int(r.StartOffset), EndOffset: int(r.EndOffset), Text: a.Quote})
		}
		if len(h.Segments) > 1 || len(h.Segments) == 1 && a.Ranges[0].End != a.Ranges[0].Start {
			// A range across elements: its end is elsewhere; keep the quote unplaced.
			h.Segments = nil
		}
		if strings.TrimSpace(h.Quote) != "" {
			it.Highlights = append(it.Highlights, h)
		}
	}
	return it, nil
}

func (w *wallabagReader) Close() error { return nil }
