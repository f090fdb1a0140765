package importer

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Exports that are lists of links in HTML, read token by token:
//
//   - The Netscape bookmark file (<!DOCTYPE NETSCAPE-Bookmark-file-1>):
//     <DT><A HREF ADD_DATE TAGS>title</A> and an optional <DD>description,
//     in <DL> folders named by <H3>; what browsers, Raindrop, Pinboard and
//     Shaarli export (wallabag reads it in src/Import/HtmlImport.php,
//     wallabag/wallabag@5afc37df). Tags become labels; folders are not kept.
//   - Pocket's older ril_export.html: <h1>Unread</h1> and <h1>Read
//     Archive</h1>, each a <ul> of <a href time_added tags>title</a>, tags
//     comma-separated (wallabag's tests/fixtures/Import/ril_export.html and
//     src/Import/PocketHtmlImport.php at the same commit).

type anchorReader struct {
	z        *html.Tokenizer
	format   Format
	archived bool // Pocket: inside "Read Archive"
	n        int
	pending  *Item // an anchor read, waiting for its <DD>
	inA      bool
	inDD     bool
	inH1     bool
	h1       strings.Builder
	text     strings.Builder
	eof      bool
	max      int // MaxEntryBytes: bounds text and h1 too, not only a token
}

func newAnchorReader(body io.Reader, format Format, lim Limits) (*anchorReader, error) {
	z := html.NewTokenizer(body)
	z.SetMaxBuf(int(lim.MaxEntryBytes))
	return &anchorReader{z: z, format: format, max: int(lim.MaxEntryBytes)}, nil
}

func (a *anchorReader) Next() (*Item, error) {
	for {
		if a.eof {
			return a.finish(io.EOF)
		}
		tt := a.z.Next()
		switch tt {
		case html.ErrorToken:
			err := a.z.Err()
			if errors.Is(err, html.ErrBufferExceeded) {
				return nil, refuse("an entry of the file is longer than the import limit")
			}
			if err != io.EOF {
				return nil, err
			}
			a.eof = true
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := a.z.TagName()
			switch string(name) {
			case "a":
				it := a.pendingDone()
				attrs := map[string]string{}
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = a.z.TagAttr()
					attrs[strings.ToLower(string(k))] = string(v)
				}
				a.n++
				a.pending = a.anchorItem(attrs)
				a.inA, a.inDD = true, false
				a.text.Reset()
				if it != nil {
					return a.check(it)
				}
			case "dd":
				if a.pending != nil {
					a.inDD = true
					a.text.Reset()
				}
			case "dt", "dl", "h3", "li":
				if it := a.pendingDone(); it != nil {
					return a.check(it)
				}
			case "h1":
				a.inH1 = true
				a.h1.Reset()
			}
		case html.EndTagToken:
			name, _ := a.z.TagName()
			switch string(name) {
			case "a":
				if a.inA && a.pending != nil {
					a.pending.Title = oneLine(a.text.String())
				}
				a.inA = false
			case "dl", "ul":
				if it := a.pendingDone(); it != nil {
					return a.check(it)
				}
			case "h1":
				a.inH1 = false
				a.archived = strings.Contains(strings.ToLower(a.h1.String()), "archive")
			}
		case html.TextToken:
			var b *strings.Builder
			switch {
			case a.inA || a.inDD:
				b = &a.text
			case a.inH1:
				b = &a.h1
			default:
				continue
			}
			t := a.z.Text()
			if b.Len()+len(t) > a.max {
				return nil, refuse("an entry of the file is longer than the import limit")
			}
			b.Write(t)
		}
	}
}

// pendingDone returns the anchor read last, with its description, once
// nothing more of it can follow.
func (a *anchorReader) pendingDone() *Item {
	it := a.pending
	if it == nil {
		return nil
	}
	if a.inDD {
		it.Description = oneLine(a.text.String())
	}
	a.pending, a.inA, a.inDD = nil, false, false
	return it
}

func (a *anchorReader) finish(end error) (*Item, error) {
	if it := a.pendingDone(); it != nil {
		return a.check(it)
	}
	return nil, end
}

func (a *anchorReader) check(it *Item) (*Item, error) {
	if it.URL == "" {
		return nil, &EntryError{Ref: it.Ref, Reason: "the link has no address"}
	}
	return it, nil
}

func (a *anchorReader) anchorItem(attrs map[string]string) *Item {
	it := &Item{Ref: fmt.Sprintf("link %d", a.n), URL: strings.TrimSpace(attrs["href"]), Status: library.StatusActive}
	if a.format == PocketHTML {
		it.SavedAt = unixTime(attrs["time_added"])
		it.Labels = splitLabels(attrs["tags"], ",")
		if a.archived {
			it.Status = library.StatusArchived
		}
		return it
	}
	it.SavedAt = unixTime(attrs["add_date"])
	if lm := unixTime(attrs["last_modified"]); lm.After(it.SavedAt) && !it.SavedAt.IsZero() {
		it.UpdatedAt = lm
	}
	it.Labels = splitLabels(attrs["tags"], ",")
	return it
}

// oneLine collapses runs of white space to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (a *anchorReader) Close() error { return nil }
