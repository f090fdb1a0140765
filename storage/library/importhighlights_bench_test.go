package library

import (
	"math"
	"math/rand"
	"strings"
	"testing"
)

// BenchmarkImportHighlightsToSavedItems imports highlights (quotes of the
// items' text, as an export's) into items the member saved before, each
// with 256 KiB of text (and as much HTML), in batches of 200 entries as the
// import runner writes them: what the import runner spends on a file that
// adds highlights to items the member has.
//
//   - entry=one: one entry of 1,000 highlights into one item (Readwise's
//     rows of one document, joined into one entry);
//   - entries=interleaved: 1,000 entries of one highlight each, alternating
//     between two items (Readwise's rows of two documents, interleaved: no
//     two consecutive rows of one document, so no joining), each item
//     ending with 500 highlights.
func BenchmarkImportHighlightsToSavedItems(b *testing.B) {
	b.Run("entry=one", func(b *testing.B) { benchmarkImportHighlights(b, 1, 1000) })
	b.Run("entries=interleaved", func(b *testing.B) { benchmarkImportHighlights(b, 2, 1) })
}

// benchmarkImportHighlights imports 1,000 highlights an op into items
// saved before, perEntry highlights an entry, the entries going to the
// items in turn.
func benchmarkImportHighlights(b *testing.B, items, perEntry int) {
	const perOp, batch = 1000, 200
	// The items' limits out of the way (b.N imports of 1,000 highlights
	// each): what an import costs, not where it stops.
	o := testOptions()
	o.maxItemHighlights, o.maxItemHighlightBytes = math.MaxInt32, math.MaxInt32
	st, m := openSavedTestWith(b, o)
	r := rand.New(rand.NewSource(1))
	vocab := benchVocab(r)
	var sb strings.Builder
	for sb.Len() < 256<<10 {
		sb.WriteString(vocab[r.Intn(len(vocab))])
		sb.WriteByte(' ')
	}
	text := sb.String()
	saved := make([]*SavedItem, items)
	for i := range saved {
		it, _, err := Of(st).SaveItem(b.Context(), m.ID, NewItem{URL: "https://example.com/long/" + vocab[i], Title: "Long " + vocab[i],
			HTML: "<p>" + text + "</p>", Text: text})
		if err != nil {
			b.Fatal(err)
		}
		saved[i] = it
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		j, err := Of(st).CreateImportJob(b.Context(), &ImportJob{MemberID: m.ID, Format: "READWISE", FileName: "h.csv", Staged: "/tmp/h", Total: perOp / perEntry})
		if err != nil {
			b.Fatal(err)
		}
		entries := make([]ImportEntry, perOp/perEntry)
		for e := range entries {
			hls := make([]ImportHighlight, perEntry)
			for i := range hls {
				at := ((n*perOp + e*perEntry + i) * 211) % (len(text) - 100)
				hls[i] = ImportHighlight{Segments: []HighlightSegment{{XPath: "/p[1]", StartOffset: at, EndOffset: at + 80, Text: text[at : at+80]}}}
			}
			it := saved[e%items]
			entries[e] = ImportEntry{Pos: e + 1, Ref: "row", Item: &ImportItem{URL: it.OriginalURL, Title: it.Title, Highlights: hls}}
		}
		b.StartTimer()
		for from := 0; from < len(entries); from += batch {
			if _, err := Of(st).ImportItems(b.Context(), m.ID, j.ID, entries[from:min(from+batch, len(entries))], nil, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		total := 0
		for _, it := range saved {
			got, err := Of(st).SavedItem(b.Context(), m.ID, it.ID)
			if err != nil {
				b.Fatal(err)
			}
			total += got.HighlightCount
		}
		if total != (n+1)*perOp {
			b.Fatalf("the items have %d highlights after %d imports of %d", total, n+1, perOp)
		}
		if _, err := Of(st).UpdateImportJob(b.Context(), m.ID, j.ID, func(j *ImportJob) { j.State = ImportDone }); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
