package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// JSON exports of GoodLinks, Karakeep and Linkwarden, read one element at
// a time as wallabag's (json.go):
//
//   - Karakeep (Settings → Import/Export, JSON): {"bookmarks": [...],
//     "lists": [...]}, a bookmark {createdAt (Unix seconds), title, tags
//     (names), lists, content {type "link", url} or {type "text", text},
//     note, archived}, as zExportBookmarkSchema and toExportFormat write
//     it (packages/shared/import-export/exporters.ts; the route
//     apps/web/app/api/bookmarks/export/route.tsx writes bookmarks before
//     lists; karakeep-app/karakeep@7ca5ee23). A text bookmark has no
//     address and is reported.
//   - Linkwarden (Settings → Migrate, JSON backup): the member's record
//     with "collections": [{name, links: [{name, url, description,
//     createdAt, importDate, tags: [{name}]}]}], as exportData writes it
//     and importFromLinkwarden reads it
//     (apps/web/lib/api/controllers/migration/exportData.ts,
//     importFromLinkwarden.ts, linkwarden/linkwarden@7550ebb8). A
//     collection is read whole (within the entry limit) and its links
//     given one by one, its name as a label.
//   - GoodLinks (Settings → Export, JSON; closed source): one line of JSON,
//     a list of {title, publishedAt, summary, readAt, addedAt, starred,
//     originalURL, url, tags}, slashes escaped (\/), times in seconds since
//     1970 with fractions, readAt absent while unread, title, summary and
//     tags sometimes absent, a summary sometimes HTML; url is the address
//     GoodLinks settled on, originalURL the one saved. This is a real
//     export of 753 links (mercuriusb/GoodLinksToHtml@f49e9caa
//     src/main/resources/GoodLinks-Export.json) as converters read it
//     (tdhooten/goodlinks-exporter@8f375201 goodlinks-exporter.py: "readAt"
//     in link means read). That export carries no highlights; a
//     "highlights" list of {content, note, time}, GoodLinks' own names for
//     a highlight's fields, is read should a file have one.

// Formats of other services' JSON exports.
const (
	GoodLinks  Format = "GOODLINKS"  // GoodLinks' JSON export
	Karakeep   Format = "KARAKEEP"   // Karakeep's JSON export
	Linkwarden Format = "LINKWARDEN" // Linkwarden's JSON backup
)

// detectJSON tells the JSON exports apart by their first bytes: an object
// with Karakeep's bookmarks or Linkwarden's collections, a list of
// GoodLinks' entries (addedAt), or else wallabag's list.
func detectJSON(t []byte) Format {
	if bytes.HasPrefix(t, []byte("{")) {
		switch {
		case bytes.Contains(t, []byte(`"bookmarks"`)):
			return Karakeep
		case bytes.Contains(t, []byte(`"collections"`)):
			return Linkwarden
		}
		return Wallabag
	}
	if bytes.Contains(t, []byte(`"addedAt"`)) && !bytes.Contains(t, []byte(`"is_archived"`)) {
		return GoodLinks
	}
	return Wallabag
}

// jsonArrayAt positions a jsonArray on the list under key of a top-level
// object; other members before it are skipped, each within max bytes.
func jsonArrayAt(r io.Reader, max int64, key string) (*jsonArray, error) {
	dec, ls := limitedJSON(r, max)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, refuse("the file is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, refuse("the JSON is malformed (%v)", err)
		}
		if tok == key {
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return nil, refuse("%q is not a JSON list", key)
			}
			return &jsonArray{dec: dec, lim: ls, name: key}, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			if errors.Is(err, errEntryTooLarge) {
				return nil, refuse("a member of the JSON object is larger than %d bytes (the import limit)", max)
			}
			return nil, refuse("the JSON is malformed (%v)", err)
		}
	}
	return nil, refuse("the JSON object has no %q list", key)
}

type serviceJSONReader struct {
	a       *jsonArray
	format  Format
	pending []*Item // Linkwarden: the links of the collection read last
}

func newServiceJSONReader(body io.Reader, format Format, lim Limits) (Reader, error) {
	var a *jsonArray
	var err error
	switch format {
	case Karakeep:
		a, err = jsonArrayAt(body, lim.MaxEntryBytes, "bookmarks")
	case Linkwarden:
		a, err = jsonArrayAt(body, lim.MaxEntryBytes, "collections")
	default:
		a, err = newJSONArray(body, lim.MaxEntryBytes, "")
	}
	if err != nil {
		return nil, err
	}
	return &serviceJSONReader{a: a, format: format}, nil
}

func (s *serviceJSONReader) Close() error { return nil }

type karakeepBookmark struct {
	CreatedAt flexNumber `json:"createdAt"`
	Title     *string    `json:"title"`
	Tags      []string   `json:"tags"`
	Content   *struct {
		Type string `json:"type"`
		URL  string `json:"url"`
		Text string `json:"text"`
	} `json:"content"`
	Note     *string  `json:"note"`
	Archived flexBool `json:"archived"`
}

type linkwardenCollection struct {
	Name  string `json:"name"`
	Links []struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Description string `json:"description"`
		CreatedAt   string `json:"createdAt"`
		ImportDate  string `json:"importDate"`
		Tags        []struct {
			Name string `json:"name"`
		} `json:"tags"`
	} `json:"links"`
}

type goodLinksEntry struct {
	URL        string     `json:"url"`
	Title      string     `json:"title"`
	Summary    string     `json:"summary"`
	Author     string     `json:"author"`
	Tags       []string   `json:"tags"`
	Starred    flexBool   `json:"starred"`
	AddedAt    flexNumber `json:"addedAt"`
	ReadAt     flexNumber `json:"readAt"`
	Highlights []struct {
		Content string     `json:"content"`
		Note    string     `json:"note"`
		Time    flexNumber `json:"time"`
	} `json:"highlights"`
}

// plainText is s without its markup, for a summary some exports keep as
// the page's HTML.
func plainText(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	n, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return s
	}
	return strings.Join(strings.Fields(textOf(n)), " ")
}

func unixFloat(f flexNumber) time.Time {
	if f <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(f), 0).UTC()
}

// itemNote keeps a bookmark's own note (Karakeep's, Raindrop's) as the
// item's note: a highlight without quote or segments, which the store
// keeps as the note on the item as a whole (library.Store.AddNote's), not
// on a passage.
func itemNote(it *Item, note string) {
	if strings.TrimSpace(note) != "" {
		it.Highlights = append([]Highlight{{Note: note}}, it.Highlights...)
	}
}

func (s *serviceJSONReader) Next() (*Item, error) {
	if s.format != Linkwarden {
		return s.nextFlat()
	}
	for len(s.pending) == 0 {
		var c linkwardenCollection
		ref, err := s.a.next(&c)
		if err != nil {
			return nil, err
		}
		for i, l := range c.Links {
			it := &Item{Ref: ref + " link " + strconv.Itoa(i+1), URL: strings.TrimSpace(l.URL), Title: l.Name, Description: l.Description,
				Status: library.StatusActive, SavedAt: dateOf(firstNonEmpty(l.ImportDate, l.CreatedAt))}
			it.Labels = addLabel(it.Labels, c.Name)
			for _, t := range l.Tags {
				it.Labels = addLabel(it.Labels, t.Name)
			}
			s.pending = append(s.pending, it)
		}
	}
	it := s.pending[0]
	s.pending = s.pending[1:]
	if it.URL == "" {
		return nil, &EntryError{Ref: it.Ref, Reason: "the link has no url"}
	}
	return it, nil
}

func (s *serviceJSONReader) nextFlat() (*Item, error) {
	switch s.format {
	case Karakeep:
		var b karakeepBookmark
		ref, err := s.a.next(&b)
		if err != nil {
			return nil, err
		}
		if b.Content == nil || b.Content.Type != "link" || b.Content.URL == "" {
			return nil, &EntryError{Ref: ref, Reason: "a text or file bookmark, not a link: not imported"}
		}
		it := &Item{Ref: ref, URL: b.Content.URL, Title: str(b.Title), SavedAt: unixFloat(b.CreatedAt), Status: library.StatusActive}
		if b.Archived {
			it.Status = library.StatusArchived
		}
		for _, t := range b.Tags {
			it.Labels = addLabel(it.Labels, t)
		}
		itemNote(it, str(b.Note))
		return it, nil
	default: // GoodLinks
		var e goodLinksEntry
		ref, err := s.a.next(&e)
		if err != nil {
			return nil, err
		}
		if e.URL == "" {
			return nil, &EntryError{Ref: ref, Reason: "the entry has no url"}
		}
		it := &Item{Ref: ref, URL: e.URL, Title: e.Title, Description: plainText(e.Summary), Author: e.Author,
			SavedAt: unixFloat(e.AddedAt), Status: library.StatusActive}
		if r := unixFloat(e.ReadAt); !r.IsZero() {
			it.Status, it.ReadAt = library.StatusArchived, &r
		}
		for _, t := range e.Tags {
			it.Labels = addLabel(it.Labels, t)
		}
		if e.Starred {
			it.Labels = addLabel(it.Labels, "Starred")
		}
		for _, h := range e.Highlights {
			if strings.TrimSpace(h.Content) != "" {
				it.Highlights = append(it.Highlights, Highlight{Quote: h.Content, Note: h.Note, CreatedAt: unixFloat(h.Time)})
			}
		}
		return it, nil
	}
}
