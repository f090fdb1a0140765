package importer

import (
	"bufio"
	"errors"
	"io"
	"regexp"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Pocket's highlights. Its export zip has, besides the list's part_*.csv,
// annotations/part_*.json: each file one JSON array of
// {url, title, highlights: [{quote, created_at}]}, created_at in Unix
// seconds, one entry per saved item with highlights (grouped by item), as
// AnnotationsDataExportService writes it
// (servers/account-data-deleter/src/dataService/annotationsExportService.ts,
// fileKey "annotations/part_%06d" and S3Bucket.writeJson adding ".json" in
// packages/aws-utils/src/S3Bucket.ts, Pocket/pocket-monorepo@fff0f693).
// Pocket kept no position: the quotes are placed where they are found in
// the content, and again once a background fetch brings it
// (PlaceFetchedQuotes).

var pocketAnnotationsRE = regexp.MustCompile(`(^|/)annotations/part_\d+\.json$`)

// maxPocketQuotes bounds the highlights held in memory while the list is
// read (they are joined to its rows by URL): a quote is at most a few
// kilobytes, and Pocket's largest libraries have some thousands.
const maxPocketQuotes = 200_000

// pocketAnnotation is an entry of annotations/part_*.json.
type pocketAnnotation struct {
	URL        string `json:"url"`
	Title      string `json:"title"`
	Highlights []struct {
		Quote     string     `json:"quote"`
		CreatedAt flexNumber `json:"created_at"`
	} `json:"highlights"`
}

// pocketQuotes are the highlights of a Pocket zip by the URL of their item,
// in file order (an entry whose URL no row has becomes an item of its own,
// after the rows: Pocket exported the highlights of items its list files
// left out, such as those of hidden states).
type pocketQuotes struct {
	byURL map[string]int // key -> index in entries
	items []*pocketQuoteItem
}

type pocketQuoteItem struct {
	ref, url, title string
	highlights      []Highlight
	used            bool
}

func pocketKey(u string) string {
	if n, err := library.NormalizeURL(u); err == nil {
		return n
	}
	return u
}

// readPocketQuotes reads every annotations file of z.
func readPocketQuotes(z *zipArchive) (*pocketQuotes, error) {
	q := &pocketQuotes{byURL: map[string]int{}}
	n := 0
	for _, name := range z.names(pocketAnnotationsRE) {
		rc, err := z.stream(z.files[name])
		if err != nil {
			return nil, err
		}
		a, err := newJSONArray(bufio.NewReaderSize(rc, 64<<10), z.lim.MaxEntryBytes, name)
		if err != nil {
			rc.Close()
			return nil, err
		}
		for {
			var e pocketAnnotation
			ref, err := a.next(&e)
			if err == io.EOF {
				break
			}
			var ee *EntryError
			if errors.As(err, &ee) || err == nil && e.URL == "" {
				continue // not an annotation: its row (if any) is imported without it
			}
			if err != nil {
				rc.Close()
				return nil, err
			}
			k := pocketKey(e.URL)
			i, ok := q.byURL[k]
			if !ok {
				i = len(q.items)
				q.byURL[k] = i
				q.items = append(q.items, &pocketQuoteItem{ref: ref, url: e.URL, title: e.Title})
			}
			for _, h := range e.Highlights {
				if h.Quote == "" {
					continue
				}
				if n++; n > maxPocketQuotes {
					rc.Close()
					return nil, refuse("the export has more than %d highlights (the import limit)", maxPocketQuotes)
				}
				hl := Highlight{Quote: h.Quote}
				if h.CreatedAt > 0 {
					hl.CreatedAt = time.Unix(int64(h.CreatedAt), 0).UTC()
				}
				q.items[i].highlights = append(q.items[i].highlights, hl)
			}
		}
		rc.Close()
	}
	return q, nil
}

// attach gives it the highlights of its URL.
func (q *pocketQuotes) attach(it *Item) {
	if q == nil || it == nil {
		return
	}
	if i, ok := q.byURL[pocketKey(it.URL)]; ok && !q.items[i].used {
		q.items[i].used = true
		it.Highlights = append(it.Highlights, q.items[i].highlights...)
	}
}

// next returns the next entry no row had, as an item; nil after the last.
func (q *pocketQuotes) next() *Item {
	if q == nil {
		return nil
	}
	for len(q.items) > 0 {
		e := q.items[0]
		q.items = q.items[1:]
		if e.used || len(e.highlights) == 0 {
			continue
		}
		// Pocket gives such an item no saved date, only its highlights':
		// it was saved at latest when first highlighted, which says more
		// than the day of the import.
		var saved time.Time
		for _, h := range e.highlights {
			if !h.CreatedAt.IsZero() && (saved.IsZero() || h.CreatedAt.Before(saved)) {
				saved = h.CreatedAt
			}
		}
		return &Item{Ref: e.ref, URL: e.url, Title: e.title, Status: library.StatusActive, SavedAt: saved, Highlights: e.highlights}
	}
	return nil
}
