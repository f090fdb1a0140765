package library

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestFirstRequestsAfterOpen times the first 20 pages of each filter right
// after a freshly written store is opened, against the same pages once
// the store has settled: a benchmark run by hand, not in CI (it writes a
// store of HEARTH_FIRST_REQUESTS items: 20,000, 100,000 and 1,000,000 in
// bench/README.md).
//
//	HEARTH_FIRST_REQUESTS=100000 go test -tags nobadger,nomysql,nopgx \
//	  -run TestFirstRequestsAfterOpen -v -timeout 60m ./storage/library/
func TestFirstRequestsAfterOpen(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HEARTH_FIRST_REQUESTS"))
	if n <= 0 {
		t.Skip("HEARTH_FIRST_REQUESTS gives no number of items")
	}
	// The library's options as in production (the tests' indexer does not
	// wait: testOptions).
	o := defaultOptions()
	// HEARTH_FIRST_STORE keeps the written store for the next run (two
	// builds compared on one store).
	dir := os.Getenv("HEARTH_FIRST_STORE")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "store")
	}
	// HEARTH_FIRST_WORDS sets the words of each text (250, about 1.5 KB;
	// 850 is about 5 KB).
	words, _ := strconv.Atoi(os.Getenv("HEARTH_FIRST_WORDS"))
	if words <= 0 {
		words = 250
	}
	// HEARTH_FIRST_CASES runs only the cases whose names it matches (an
	// expression matching none only writes the store).
	only, err := regexp.Compile(os.Getenv("HEARTH_FIRST_CASES"))
	if err != nil {
		t.Fatal(err)
	}
	// HEARTH_FIRST_COPY=0 opens the kept store itself for each case (a
	// restart of a settled store) instead of a copy of it as written: a
	// store of a million items is too large to copy.
	copyStore := os.Getenv("HEARTH_FIRST_COPY") != "0"
	memberID, label := "", "topic"
	if b, err := os.ReadFile(dir + ".member"); err == nil {
		memberID = string(b)
	} else {
		memberID, label = writeFirstRequestsStore(t, dir, n, words, o)
		if err := os.WriteFile(dir+".member", []byte(memberID), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := firstRequestsCases(label)
	for _, c := range cases {
		if !only.MatchString(c.name) {
			continue
		}
		// Each case opens its own copy of the store as it was written,
		// or the store itself.
		openDir := dir
		if copyStore {
			openDir = filepath.Join(t.TempDir(), "copy")
			if out, err := exec.Command("cp", "-a", dir, openDir).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
		}
		st, err := openWith(openDir, storage.Options{}, o)
		if err != nil {
			t.Fatal(err)
		}
		// The first requests come while the indexer catches up (it
		// starts textIndexDelay after the open).
		time.Sleep(o.textIndexDelay + 200*time.Millisecond)
		backlog, err := Of(st).SearchIndexBacklog(t.Context(), memberID)
		if err != nil {
			t.Fatal(err)
		}
		var first []time.Duration
		if prof := os.Getenv("HEARTH_FIRST_PROFILE"); prof != "" {
			// The CPU profile of the first requests, one file a case.
			f, err := os.Create(prof + "." + strings.ReplaceAll(c.name, " ", "-"))
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Fatal(err)
			}
			first = timePages(t, st, memberID, c.f, 20)
			pprof.StopCPUProfile()
			f.Close()
		} else {
			first = timePages(t, st, memberID, c.f, 20)
		}
		waitIndexed(t, st, memberID)
		time.Sleep(2 * time.Second) // compactions after the open
		warm := timePages(t, st, memberID, c.f, 20)
		fmt.Printf("%-16s first 20 (backlog %6d): median %7.2f ms, p95 %7.2f ms; warm: median %7.2f ms, p95 %7.2f ms\n",
			c.name, backlog, ms(first[len(first)/2]), ms(first[len(first)*95/100]), ms(warm[len(warm)/2]), ms(warm[len(warm)*95/100]))
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if copyStore {
			if err := os.RemoveAll(openDir); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// firstRequestsCase is a page TestFirstRequestsAfterOpen times.
type firstRequestsCase struct {
	name string
	f    ItemFilter
}

// firstRequestsCases are the pages TestFirstRequestsAfterOpen times, of
// the store's label.
func firstRequestsCases(label string) []firstRequestsCase {
	yes := true
	return []firstRequestsCase{
		{"first page", ItemFilter{}},
		{"in:archive", ItemFilter{Status: StatusArchived}},
		{"type:newsletter", ItemFilter{Type: TypeNewsletter}},
		{"label:topic", ItemFilter{LabelsAll: [][]string{{label}}}},
		{"has:highlights", ItemFilter{HasHighlights: &yes}},
		{"common word", ItemFilter{Text: "arba"}},
		{"rare word", ItemFilter{Text: "zyzzyva"}},
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timePages times n first pages of f (50 items, newest first), sorted.
func timePages(t *testing.T, st *storage.Store, memberID string, f ItemFilter, n int) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		s := time.Now()
		page, err := Of(st).SavedItemsPage(t.Context(), memberID, f, PageRequest{Field: SortCreatedAt, Desc: true, First: 50})
		ds = append(ds, time.Since(s))
		if errors.Is(err, ErrSearchTooBroad) {
			t.Logf("%q: %v", f.Text, err) // timed all the same
		} else if err != nil || len(page.Items) == 0 {
			t.Fatalf("%+v: %v, %v", f, page, err)
		}
	}
	slices.Sort(ds)
	return ds
}

// writeFirstRequestsStore writes n items of words Zipf-distributed words
// (a third archived, a tenth newsletters, a fifth labelled, one in fifty
// with highlights) into a store at dir, and closes it as soon as the last
// is written (its indexer perhaps not done), with the library's options o.
func writeFirstRequestsStore(t *testing.T, dir string, n, nwords int, o options) (memberID, label string) {
	t.Helper()
	st, err := openWith(dir, storage.Options{}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var m *members.Member
	var l *Label
	if m, err = members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse"); err == nil {
		l, err = Of(st).CreateLabel(t.Context(), m.ID, "topic", "#000000")
	}
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	vocab := benchVocab(r)
	z := rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))
	base := storage.Now().Add(-time.Duration(n) * time.Second)
	rare := n / 2 // the item with the rare word, in the inbox
	if rare%3 == 0 {
		rare++
	}
	// Transactions of 100 items: 500 passed Badger's bound on a
	// transaction with the store's default 8 MiB memtable.
	for i := 0; i < n; i += 100 {
		err := st.Update(t.Context(), func(tx *storage.Tx) error {
			for j := i; j < min(i+100, n); j++ {
				var words []string
				for len(words) < nwords {
					words = append(words, vocab[z.Uint64()])
				}
				at := base.Add(time.Duration(j) * time.Second)
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive,
					Title: strings.Join(words[:4], " "), OriginalURL: fmt.Sprintf("https://site%d.example/%d", j%300, j),
					SourceDomain: fmt.Sprintf("site%d.example", j%300), CreatedAt: at, UpdatedAt: at, WordCount: len(words)}
				if j%3 == 0 {
					it.Status = StatusArchived
				}
				if j%10 == 0 {
					it.Type = TypeNewsletter
				}
				if j%5 == 0 {
					it.LabelIDs = []string{l.ID}
				}
				if j%50 == 0 {
					it.HighlightCount = 1
				}
				text := strings.Join(words, " ")
				if j == rare {
					text += " zyzzyva"
				}
				if err := writeItem(tx, itemChange{it: it, url: it.OriginalURL, content: &ItemContent{Text: text}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return m.ID, "topic"
}

// Right after a restart or a burst of saves the indexer has a backlog: a
// search for a rare word reads the pending items one by one and finds its
// item, where it walked the whole library and went over the budget.
func TestRareWordWithABacklog(t *testing.T) {
	st, m := openSavedTest(t)
	write := func(from, to int, text func(i int) string) {
		for i := from; i < to; i += 500 {
			err := st.Update(t.Context(), func(tx *storage.Tx) error {
				for j := i; j < min(i+500, to); j++ {
					at := storage.Now()
					it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: "t", CreatedAt: at, UpdatedAt: at}
					if err := writeItem(tx, itemChange{it: it, content: &ItemContent{Text: text(j)}}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, maxVerified, func(int) string { return "plain words" })
	waitIndexed(t, st, m.ID)
	Of(st).state().indexPaused.Store(true)
	defer Of(st).state().indexPaused.Store(false)
	write(0, 600, func(i int) string {
		if i == 300 {
			return "a zyzzyva among plain words"
		}
		return "plain words"
	})
	if n, err := Of(st).SearchIndexBacklog(t.Context(), m.ID); err != nil || n < 600 {
		t.Fatalf("backlog %d, %v; want the 600 new items pending", n, err)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "zyzzyva"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("a rare word with 600 items pending: %+v, %v; want its one item", page, err)
	}
}

// Writers that outrun the indexer wait for it: after each commit of a burst
// of saves (an import's), at most maxTextBacklog texts wait, so a store
// closed right after the burst opens with a backlog a search verifies
// itself, and a rare word is found from the first request.
func TestWritersKeepTheTextBacklogBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o := defaultOptions() // as in production: texts gather
	st, err := openWith(dir, storage.Options{}, o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3 * maxTextBacklog
	for i := 0; i < n; i += 500 {
		err := st.Update(t.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+500; j++ {
				at := storage.Now()
				text := "plain words of item " + strconv.Itoa(j)
				if j == n-10 {
					text += " zyzzyva"
				}
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: "t", CreatedAt: at, UpdatedAt: at}
				if err := writeItem(tx, itemChange{it: it, content: &ItemContent{Text: text}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var waiting uint64
		if err := st.View(t.Context(), func(tx *storage.Tx) error {
			waiting, err = memberIndex(m.ID).Waiting(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if waiting > maxTextBacklog {
			t.Fatalf("after %d saves, %d texts wait for the index; want at most %d", i+500, waiting, maxTextBacklog)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = openWith(dir, storage.Options{}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "zyzzyva"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("a rare word right after the open: %+v, %v; want its one item", page, err)
	}
}

// BenchmarkFirstRequestsStore times, on the store TestFirstRequestsAfterOpen
// kept at HEARTH_FIRST_STORE (opened as it is, its index caught up), each
// of its pages warm: for profiles (-cpuprofile) of one case.
func BenchmarkFirstRequestsStore(b *testing.B) {
	st, memberID := openKeptStore(b)
	for _, c := range firstRequestsCases("topic") {
		b.Run(strings.ReplaceAll(c.name, " ", "-"), func(b *testing.B) {
			for b.Loop() {
				if _, err := Of(st).SavedItemsPage(b.Context(), memberID, c.f, PageRequest{Field: SortCreatedAt, Desc: true, First: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNewWordPages times, on the store TestFirstRequestsAfterOpen
// kept at HEARTH_FIRST_STORE (opened as it is, its index caught up, warm),
// the first page of a word no page has asked for yet: each iteration a
// needle of two of the vocabulary's syllables not asked before (a page
// asked again comes from pageCache), those that fill a page of 50 (a
// needle in too few items, or one the search refuses as too broad, is
// left out of the figures). Its median, p25 and p75 against the first
// page's median, warm: how much of a word's first request after an open
// is the open's (BenchmarkFirstRequestAfterOpen) and how much the word's.
// (ns/op counts the needles passed over too: read the metrics.)
func BenchmarkNewWordPages(b *testing.B) {
	st, memberID := openKeptStore(b)
	page := func(f ItemFilter) (time.Duration, int) {
		start := time.Now()
		p, err := Of(st).SavedItemsPage(b.Context(), memberID, f, PageRequest{Field: SortCreatedAt, Desc: true, First: 50})
		if err != nil {
			return 0, 0
		}
		return time.Since(start), len(p.Items)
	}
	var first, words []time.Duration
	for range 50 {
		d, _ := page(ItemFilter{})
		first = append(first, d)
	}
	next := 0
	for b.Loop() {
		syl := benchSyllables
		for ; next < len(syl)*len(syl); next++ {
			d, n := page(ItemFilter{Text: syl[next/len(syl)] + syl[next%len(syl)]})
			if n == 50 {
				words = append(words, d)
				next++
				break
			}
		}
	}
	if len(words) == 0 {
		b.Skip("no needle filled a page")
	}
	slices.Sort(first)
	slices.Sort(words)
	b.ReportMetric(ms(first[len(first)/2]), "first-page-median-ms")
	b.ReportMetric(ms(words[len(words)/2]), "word-median-ms")
	b.ReportMetric(ms(words[len(words)/4]), "word-p25-ms")
	b.ReportMetric(ms(words[len(words)*3/4]), "word-p75-ms")
	b.ReportMetric(float64(len(words)), "words")
}

// openKeptStore opens the store TestFirstRequestsAfterOpen kept at
// HEARTH_FIRST_STORE (skipping without one), closed when b ends, and waits
// for its index to catch up; it returns the store and its member's id.
func openKeptStore(b *testing.B) (*storage.Store, string) {
	b.Helper()
	dir := os.Getenv("HEARTH_FIRST_STORE")
	member, err := os.ReadFile(dir + ".member")
	if dir == "" || err != nil {
		b.Skip("HEARTH_FIRST_STORE names no kept store")
	}
	st, err := openWith(dir, storage.Options{}, testOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	memberID := string(member)
	waitIndexed(b, st, memberID)
	return st, memberID
}

// BenchmarkFirstRequestAfterOpen opens the store TestFirstRequestsAfterOpen
// kept at HEARTH_FIRST_STORE (itself: a restart of a settled store), asks
// each case's first page once and closes it again, b.N times: the time of
// first requests alone (the open and close are outside the timer; their
// median and p95 as metrics, a mean moves with one stall), and with
// -cpuprofile their profile (-focus SavedItemsPage: the open is in it).
func BenchmarkFirstRequestAfterOpen(b *testing.B) {
	dir := os.Getenv("HEARTH_FIRST_STORE")
	member, err := os.ReadFile(dir + ".member")
	if dir == "" || err != nil {
		b.Skip("HEARTH_FIRST_STORE names no kept store")
	}
	for _, c := range firstRequestsCases("topic") {
		b.Run(strings.ReplaceAll(c.name, " ", "-"), func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				b.StopTimer()
				st, err := openWith(dir, storage.Options{}, testOptions())
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond) // the open's own work settles
				b.StartTimer()
				start := time.Now()
				_, err = Of(st).SavedItemsPage(b.Context(), string(member), c.f, PageRequest{Field: SortCreatedAt, Desc: true, First: 50})
				ds = append(ds, time.Since(start))
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			slices.Sort(ds)
			b.ReportMetric(ms(ds[len(ds)/2]), "median-ms")
			b.ReportMetric(ms(ds[len(ds)*95/100]), "p95-ms")
		})
	}
}
