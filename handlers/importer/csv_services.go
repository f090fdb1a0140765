package importer

import (
	"errors"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// CSV exports of Raindrop, Readwise Reader, Readwise (highlights) and
// Matter, read by their header as the other CSV formats (csv.go): BOM,
// CRLF, quoted line breaks, columns in any order and empty columns are
// the csv package's and newCSVReader's. The columns, and how a well-used
// importer reads them:
//
//   - Raindrop (Settings → Backups, CSV):
//     id,title,note,excerpt,url,folder,tags,created,cover,highlights,favorite;
//     tags comma-separated ("a, b"), folder a path ("Work/Reading"),
//     created ISO 8601, favorite "true"/"false", note the bookmark's
//     note (kept as the item's note, not on a passage) (the columns as a member
//     lists them from a real backup: wallabag/wallabag#8211; id and
//     favorite added in Raindrop 5.x, raindropio/help@d2e70fa2
//     changelog/web.mdx). How the highlights cell is laid out is published
//     nowhere (Raindrop's backup is made by its closed server; the
//     open-source web app, raindropio/app@3ae485ff, only links to it), and
//     no open-source reader of the backup splits it: Karakeep has no
//     Raindrop parser (parsers.ts at karakeep-app/karakeep@7ca5ee23),
//     Linkwarden none (linkwarden/linkwarden@7550ebb8),
//     tdhooten/omnivore-import-tool@47162582 Models/RaindropModel.cs reads
//     the column as one string and drops it, ReessKennedy/CSVtoMDConvert@8d39f98f
//     CSVtoMD.py copies it whole; all read the columns by name, in our
//     order. So it is read to lose nothing: "Highlight:" lines each
//     followed by their "Note:" lines when the cell has them, otherwise
//     each paragraph (text between blank lines) a highlight.
//   - Readwise Reader (Settings → Export, CSV):
//     Title,URL,ID,Document tags,Saved date,Reading progress,Location,Seen;
//     Document tags a Python list literal (['a', 'b']), Saved date
//     "2024-01-31 08:15:02.123456+00:00", Reading progress 0 to 1,
//     Location new, later, shortlist, archive or feed (feed documents were
//     not saved by the member and are skipped), as Karakeep's
//     parseReadwiseReaderBookmarkFile
//     (packages/shared/import-export/parsers.ts,
//     karakeep-app/karakeep@7ca5ee23).
//   - Readwise highlights (readwise.io/export, CSV): Highlight,Book Title,
//     Book Author,Amazon Book ID,Note,Color,Tags,Location Type,Location,
//     Highlighted at,Document tags; one row a highlight, consecutive rows of
//     one document making one item. The export names no address: each
//     readers' tests copy this header whole (e.g. the highlight importers
//     of books-to-obsidian tools), and Readwise's API keeps source_url on
//     the book, not in this file. So a document is found in the member's
//     library by its exact title (the Reader CSV imported first brings the
//     articles with their URLs); a URL column, when a hand-made file has
//     one, is used instead.
//   - Matter (Settings → Export, CSV): Title,Author,Publisher,URL,Tags,
//     Word Count,In Queue,Favorited,Read,Highlight_Count,
//     Last Interaction Date,File Id; Tags ";"-separated, "In Queue" False
//     meaning archived, as Karakeep's parseMatterBookmarkFile (same file
//     and commit).

// Formats of other services' CSV exports.
const (
	Raindrop          Format = "RAINDROP"        // Raindrop's CSV backup
	ReadwiseReader    Format = "READWISE_READER" // Readwise Reader's CSV export
	ReadwiseHighlight Format = "READWISE"        // Readwise's highlights CSV
	Matter            Format = "MATTER"          // Matter's CSV export
)

// detectServiceCSV recognises the CSV exports of this file by their header.
func detectServiceCSV(cols []string) Format {
	switch {
	case hasCols(cols, "Highlight", "Book Title", "Highlighted at"):
		return ReadwiseHighlight
	case hasCols(cols, "Title", "URL", "Document tags", "Saved date", "Location"):
		return ReadwiseReader
	case hasCols(cols, "Title", "URL", "In Queue", "Favorited"):
		return Matter
	case hasCols(cols, "url", "folder", "excerpt", "created"):
		return Raindrop
	}
	return Auto
}

// serviceItem reads a row of one of this file's formats (ok false: the
// format is another).
func (c *csvReader) serviceItem(rec []string) (it *Item, ok bool, err error) {
	switch c.format {
	case Raindrop, ReadwiseReader, ReadwiseHighlight, Matter:
	default:
		return nil, false, nil // without an Item: every row of the other formats comes here first
	}
	it = &Item{Status: library.StatusActive}
	switch c.format {
	case Raindrop:
		it.URL = c.get(rec, "url")
		it.Title = c.get(rec, "title")
		it.Description = c.get(rec, "excerpt")
		it.LeadImage = c.get(rec, "cover")
		it.SavedAt = dateOf(c.get(rec, "created"))
		it.Labels = splitLabels(c.get(rec, "tags"), ",")
		if f := c.get(rec, "folder"); f != "" && !strings.EqualFold(f, "Unsorted") {
			it.Labels = addLabel(it.Labels, f)
		}
		if strings.EqualFold(c.get(rec, "favorite"), "true") {
			it.Labels = addLabel(it.Labels, "Starred")
		}
		it.Highlights = raindropHighlights(c.get(rec, "highlights"))
		itemNote(it, c.get(rec, "note"))
	case ReadwiseReader:
		if strings.EqualFold(c.get(rec, "Location"), "feed") {
			return nil, true, errors.New("a feed document (Reader's feed, not saved by the member): not imported")
		}
		it.URL = c.get(rec, "URL")
		it.Title = c.get(rec, "Title")
		it.SavedAt = dateOf(c.get(rec, "Saved date"))
		it.Labels = pythonListLabels(c.get(rec, "Document tags"))
		if p, err := strconv.ParseFloat(c.get(rec, "Reading progress"), 64); err == nil && p > 0 && p <= 1 {
			it.ReadingProgress = p * 100
		}
		if strings.EqualFold(c.get(rec, "Location"), "archive") {
			it.Status = library.StatusArchived
		}
	case ReadwiseHighlight:
		it.URL = c.get(rec, "URL", "Source URL", "Book URL", "Highlight URL")
		it.Title = c.get(rec, "Book Title")
		it.Author = c.get(rec, "Book Author")
		it.Labels = pythonListLabels(c.get(rec, "Document tags"))
		q := c.get(rec, "Highlight")
		if q == "" {
			return nil, true, errors.New("the row has no highlight")
		}
		h := Highlight{Quote: q, Note: c.get(rec, "Note"), CreatedAt: dateOf(c.get(rec, "Highlighted at"))}
		it.Highlights = []Highlight{h}
		it.SavedAt = h.CreatedAt  // Readwise has no saved date: the first highlight's
		it.ByTitle = it.URL == "" // the export's own shape: titles only
		if it.Title == "" && it.URL == "" {
			return nil, true, errors.New("the highlight names neither a title nor an address")
		}
	case Matter:
		it.URL = c.get(rec, "URL")
		it.Title = c.get(rec, "Title")
		it.Author = c.get(rec, "Author")
		it.SavedAt = dateOf(c.get(rec, "Last Interaction Date"))
		it.Labels = splitLabels(c.get(rec, "Tags"), ";")
		if n, err := strconv.Atoi(c.get(rec, "Word Count")); err == nil {
			it.WordCount = n
		}
		if strings.EqualFold(c.get(rec, "In Queue"), "False") {
			it.Status = library.StatusArchived
		}
		if strings.EqualFold(c.get(rec, "Favorited"), "True") {
			it.Labels = addLabel(it.Labels, "Starred")
		}
	}
	return it, true, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// raindropHighlights reads Raindrop's highlights column: "Highlight: ..."
// lines, each optionally followed by "Note: ..." lines, text without either
// prefix continuing the line before it (a quote of several lines); a cell
// without such lines, one highlight a paragraph.
func raindropHighlights(s string) []Highlight {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if !strings.HasPrefix(s, "Highlight:") && !strings.Contains(s, "\nHighlight:") {
		var out []Highlight
		for _, p := range strings.Split(s, "\n\n") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, Highlight{Quote: p})
			}
		}
		return out
	}
	var out []Highlight
	inNote := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "Highlight:"):
			out = append(out, Highlight{Quote: strings.TrimSpace(strings.TrimPrefix(line, "Highlight:"))})
			inNote = false
		case strings.HasPrefix(line, "Note:") && len(out) > 0:
			out[len(out)-1].Note = strings.TrimSpace(strings.TrimPrefix(line, "Note:"))
			inNote = true
		case strings.TrimSpace(line) == "" || len(out) == 0:
		case inNote:
			out[len(out)-1].Note += "\n" + strings.TrimSpace(line)
		default:
			out[len(out)-1].Quote += "\n" + strings.TrimSpace(line)
		}
	}
	kept := out[:0]
	for _, h := range out {
		if h.Quote != "" {
			kept = append(kept, h)
		}
	}
	return kept
}

// pythonListLabels reads Readwise's tag lists: a Python list literal
// (['a', "b's"]), as Karakeep turns it into JSON, or a plain
// comma-separated list.
func pythonListLabels(s string) []string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") {
		return splitLabels(s, ",")
	}
	var out []string
	inner := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	for len(inner) > 0 {
		inner = strings.TrimLeft(inner, " ,")
		if inner == "" {
			break
		}
		q := inner[0]
		if q != '\'' && q != '"' {
			name, rest, _ := strings.Cut(inner, ",")
			out = addLabel(out, name)
			inner = rest
			continue
		}
		var b strings.Builder
		i := 1
		for ; i < len(inner) && inner[i] != q; i++ {
			if inner[i] == '\\' && i+1 < len(inner) {
				i++
			}
			b.WriteByte(inner[i])
		}
		out = addLabel(out, b.String())
		if i >= len(inner) {
			break
		}
		inner = inner[i+1:]
		if len(out) >= library.MaxLabels {
			break
		}
	}
	return out
}

// groupingReader joins consecutive items of one URL (Readwise's rows are
// one highlight each, grouped by document): one item with all their
// highlights, since an import adds nothing to an item it has made.
type groupingReader struct {
	Reader
	next *Item
	err  error
}

func (g *groupingReader) Next() (*Item, error) {
	var cur *Item
	if g.next != nil || g.err != nil {
		cur, g.next = g.next, nil
		if cur == nil {
			err := g.err
			g.err = nil
			return nil, err
		}
	} else {
		it, err := g.Reader.Next()
		if err != nil {
			return nil, err
		}
		cur = it
	}
	for n := 0; n < maxGroupHighlights; n++ {
		it, err := g.Reader.Next()
		if err != nil {
			g.err = err // given after cur, io.EOF included
			return cur, nil
		}
		if groupKey(it) != groupKey(cur) {
			g.next = it
			return cur, nil
		}
		cur.Highlights = append(cur.Highlights, it.Highlights...)
		for _, l := range it.Labels {
			cur.Labels = addLabel(cur.Labels, l)
		}
	}
	return cur, nil
}

// groupKey is what makes rows one document: the URL, or the title when
// the row has none.
func groupKey(it *Item) string {
	if it.URL == "" {
		return "title:" + strings.ToLower(strings.TrimSpace(it.Title))
	}
	return pocketKey(it.URL)
}

// maxGroupHighlights bounds the rows joined into one item.
const maxGroupHighlights = 5000
