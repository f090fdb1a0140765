package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The search corpus: realistic articles of 5–10 KB of varied
// text, deterministic by seed. Words follow a Zipf distribution over a
// vocabulary of a few thousand (made of English syllables, with the most
// common English words first); a few words are planted in a known number of
// items so that the benchmark's queries have known answers:
//
//	lantern      in 83 % of items (a frequent word)
//	quasquillion in 100 items
//	zanzibarite  in 10 items (a rare word)
//	xylocarpqz   in none
//
// Items come from 2,000 domains (Zipf), one of them (rare-domain.org) on
// 10 items; 50 labels (Zipf, 0–3 per item), one of them (rare-label) on 10
// items; 20 % are archived, 2 % in the trash, 5 % newsletters, 1 % have a
// highlight. the info file (STORE.json) records the queries with these
// answers (and a saved: range holding 10 items, as creation times are the
// seeding's).

var commonWords = strings.Fields(`the of and to a in is that for it as was with be by on not he this are or
his from at which but have an they you were her she there one all we their been has will would can if
more when so no what about up out into them than some time could only other new these two may first
then do any like my now over such our man me even most made after also did many before must through
back years where much your way well down should because each just those people how too little state
good very make world still own see men work long get here between both life being under never day
same another know while last might us great old year off come since against go came right used take`)

var syllables = strings.Fields(`ar al an ba be bi bo ca ce co da de di do el en er es fa fe fi fo ga ge
go ha he hi ho in is it ka ke la le li lo lu ma me mi mo mu na ne ni no nu or pa pe pi po ra re ri ro
ru sa se si so su ta te ti to tu un ur va ve vi wa we wi ya yo za ze`)

type corpus struct {
	r     *rand.Rand
	vocab []string
	zipf  *rand.Zipf
}

func newCorpus(seed int64) *corpus {
	r := rand.New(rand.NewSource(seed))
	seen := map[string]bool{}
	vocab := make([]string, 0, 4000)
	for _, w := range commonWords {
		if !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	for len(vocab) < 4000 {
		n := 1 + r.Intn(3) + r.Intn(2)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(syllables[r.Intn(len(syllables))])
		}
		if r.Intn(4) == 0 {
			b.WriteString([]string{"s", "ed", "ing", "ly", "tion"}[r.Intn(5)])
		}
		w := b.String()
		// Planted words must not occur by chance.
		if seen[w] || strings.Contains(w, "lantern") || len(w) < 2 {
			continue
		}
		seen[w] = true
		vocab = append(vocab, w)
	}
	return &corpus{r: r, vocab: vocab, zipf: rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))}
}

func (c *corpus) word() string { return c.vocab[c.zipf.Uint64()] }

// sentence is 6–20 words, capitalised, with a comma now and then.
func (c *corpus) sentence(b *strings.Builder, plant []string) {
	n := 6 + c.r.Intn(15)
	at := -1
	if len(plant) > 0 {
		at = c.r.Intn(n)
	}
	for i := 0; i < n; i++ {
		w := c.word()
		if i == at {
			w = plant[0]
		}
		if i == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		if i < n-1 && c.r.Intn(9) == 0 {
			b.WriteByte(',')
		}
	}
	b.WriteString([]string{".", ".", ".", "?", "!"}[c.r.Intn(5)])
}

// article returns the title, description, HTML and text of one article
// with the planted words in its text.
func (c *corpus) article(plant []string) (title, desc, html, text string) {
	var tb strings.Builder
	c.sentence(&tb, nil)
	title = strings.TrimRight(tb.String(), ".?!")
	var db strings.Builder
	c.sentence(&db, nil)
	db.WriteByte(' ')
	c.sentence(&db, nil)
	desc = db.String()
	size := 5000 + c.r.Intn(5000)
	var paras []string
	total := 0
	for total < size {
		var pb strings.Builder
		for s := 0; s < 3+c.r.Intn(5) && total+pb.Len() < size; s++ {
			if s > 0 {
				pb.WriteByte(' ')
			}
			var p []string
			if len(plant) > 0 && c.r.Intn(3) == 0 {
				p, plant = plant[:1], plant[1:]
			}
			c.sentence(&pb, p)
		}
		paras = append(paras, pb.String())
		total += pb.Len() + 2
	}
	if len(plant) > 0 { // the rest in a last paragraph
		var pb strings.Builder
		for i := range plant {
			if i > 0 {
				pb.WriteByte(' ')
			}
			c.sentence(&pb, plant[i:i+1])
		}
		paras = append(paras, pb.String())
	}
	text = strings.Join(paras, "\n\n")
	html = "<p>" + strings.Join(paras, "</p>\n<p>") + "</p>"
	return title, desc, html, text
}

// pick returns count distinct numbers below n.
func pick(r *rand.Rand, n, count int) map[int]bool {
	out := map[int]bool{}
	for len(out) < count && len(out) < n {
		out[r.Intn(n)] = true
	}
	return out
}

// corpusInfo is what the search benchmark needs to know about a corpus.
type corpusInfo struct {
	Items      int    `json:"items"`
	Member     string `json:"member"`
	SavedRange string `json:"saved_range"` // a saved: value holding 10 items
	TextBytes  int64  `json:"text_bytes"`  // title + description + text
	// The search keys (storage.SearchIndexSize), keys and values before
	// Badger's compression.
	FoldedTextBytes   int64 `json:"folded_text_bytes"`
	TrigramIndexBytes int64 `json:"trigram_index_bytes"`
	FilterKeyBytes    int64 `json:"filter_key_bytes"`
}

// seedCorpus fills a stopped store with n corpus items; with export set it
// also writes them as CSV (id,domain,title,description,text) for SQLite.
func seedCorpus(st *storage.Store, member string, n int, seed int64, infoPath, export string) error {
	m, err := members.Of(st).CreateMember(context.Background(), member, "Bench", "bench password 1")
	if err != nil {
		return err
	}
	c := newCorpus(seed)
	r := rand.New(rand.NewSource(seed + 1))
	domains := make([]string, 2000)
	for i := range domains {
		domains[i] = fmt.Sprintf("%s%s.%s", c.vocab[100+r.Intn(3000)], c.vocab[100+r.Intn(3000)], []string{"com", "org", "net", "io", "news"}[r.Intn(5)])
	}
	domains[len(domains)-1] = "rare-domain.org"
	domainZipf := rand.NewZipf(r, 1.1, 2, uint64(len(domains)-2))
	labelIDs := make([]string, 50)
	for i := range labelIDs {
		name := fmt.Sprintf("topic-%02d", i)
		if i == len(labelIDs)-1 {
			name = "rare-label"
		}
		l, err := library.Of(st).CreateLabel(context.Background(), m.ID, name, "#336699")
		if err != nil {
			return err
		}
		labelIDs[i] = l.ID
	}
	labelZipf := rand.NewZipf(r, 1.2, 2, uint64(len(labelIDs)-2))
	rare, hundred := pick(r, n, 10), pick(r, n, 100)
	rareDomain, rareLabel := pick(r, n, 10), pick(r, n, 10)
	var w *csv.Writer
	if export != "" {
		f, err := os.Create(export)
		if err != nil {
			return err
		}
		defer f.Close()
		w = csv.NewWriter(f)
		defer w.Flush()
	}
	info := corpusInfo{Items: n, Member: member}
	var archived, trashed, highlighted []string
	savedFrom, savedAt := n/2, time.Time{}
	for i := 0; i < n; i++ {
		var plant []string
		if r.Float64() < 0.83 {
			plant = append(plant, "lantern")
		}
		if hundred[i] {
			plant = append(plant, "quasquillion")
		}
		if rare[i] {
			plant = append(plant, "zanzibarite")
		}
		title, desc, html, text := c.article(plant)
		domain := domains[domainZipf.Uint64()]
		if rareDomain[i] {
			domain = domains[len(domains)-1]
		}
		var labels []string
		for k := r.Intn(4); k > 0; k-- {
			labels = append(labels, labelIDs[labelZipf.Uint64()])
		}
		if rareLabel[i] {
			labels = append(labels, labelIDs[len(labelIDs)-1])
		}
		typ, url := library.TypeArticle, fmt.Sprintf("https://%s/%d/%s", domain, i, c.vocab[r.Intn(len(c.vocab))])
		if r.Float64() < 0.05 {
			typ = library.TypeNewsletter
		}
		it, _, err := library.Of(st).SaveItem(context.Background(), m.ID, library.NewItem{Type: typ, URL: url, Title: title, Description: desc,
			SourceDomain: domain, WordCount: len(strings.Fields(text)), HTML: html, Text: text, LabelIDs: labels})
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		info.TextBytes += int64(len(title) + len(desc) + len(text))
		switch x := r.Float64(); {
		case x < 0.02:
			trashed = append(trashed, it.ID)
		case x < 0.22:
			archived = append(archived, it.ID)
		}
		if r.Float64() < 0.01 {
			highlighted = append(highlighted, it.ID)
		}
		if i == savedFrom {
			savedAt = it.CreatedAt
		}
		if i == savedFrom+9 {
			info.SavedRange = savedAt.Format(time.RFC3339Nano) + ".." + it.CreatedAt.Add(time.Millisecond).Format(time.RFC3339Nano)
		}
		if w != nil {
			if err := w.Write([]string{it.ID, domain, title, desc, text}); err != nil {
				return err
			}
		}
		if (i+1)%10000 == 0 {
			fmt.Fprintf(os.Stderr, "gqlbench: %d items\n", i+1)
		}
	}
	if err := archiveAndHighlight(st, m.ID, archived, trashed, highlighted); err != nil {
		return err
	}
	if err := waitSearchIndex(st, m.ID, n); err != nil {
		return err
	}
	if info.FoldedTextBytes, info.TrigramIndexBytes, info.FilterKeyBytes, err = library.Of(st).SearchIndexSize(context.Background(), m.ID); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gqlbench: text %d bytes; search keys: folded text %d, trigram index %d (%.0f %% of the text), filters %d\n",
		info.TextBytes, info.FoldedTextBytes, info.TrigramIndexBytes, 100*float64(info.TrigramIndexBytes)/float64(max(info.TextBytes, 1)), info.FilterKeyBytes)
	b, _ := json.MarshalIndent(info, "", "  ")
	return os.WriteFile(infoPath, b, 0o644)
}

// archiveAndHighlight moves the corpus's items archived and trashed to the
// archive and the trash (in batches of library.MaxBatchIDs) and highlights
// the items highlighted.
func archiveAndHighlight(st *storage.Store, memberID string, archived, trashed, highlighted []string) error {
	for status, batch := range map[string][]string{library.StatusArchived: archived, library.StatusDeleted: trashed} {
		for len(batch) > 0 {
			k := min(len(batch), library.MaxBatchIDs)
			if _, err := library.Of(st).SetItemsStatus(context.Background(), memberID, batch[:k], status); err != nil {
				return err
			}
			batch = batch[k:]
		}
	}
	for _, id := range highlighted {
		if _, err := library.Of(st).CreateHighlight(context.Background(), memberID, id, []library.HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 5, Text: "words"}}, ""); err != nil {
			return err
		}
	}
	return nil
}

// waitSearchIndex waits until the search index has taken every one of the
// member's items (saved of them): it is built in the background as items
// are saved, and the benchmarks measure it finished. A member with no item
// has no index to wait for (the indexer never builds one, so its backlog
// stays at the one build not done).
func waitSearchIndex(st *storage.Store, memberID string, saved int) error {
	for saved > 0 {
		n, err := library.Of(st).SearchIndexBacklog(context.Background(), memberID)
		if err != nil || n == 0 {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
