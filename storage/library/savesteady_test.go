package library

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// saveBench is a store with one member and the articles the save
// benchmarks write (200 articles of 5–10 KB, the same on every run).
type saveBench struct {
	st     *storage.Store
	member string
	arts   []struct{ title, text string }
	n      int // saves so far: each one a new URL
}

func newSaveBench(b *testing.B, sync bool) *saveBench {
	// The library's options as in production (testOptions' indexer does
	// not wait).
	st, err := openWith(b.TempDir(), storage.Options{SyncWrites: &sync, GCInterval: -1}, defaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	m, err := members.Of(st).CreateMember(b.Context(), "alice", "", "correct horse")
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	vocab := benchVocab(r)
	z := rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))
	sb := &saveBench{st: st, member: m.ID, arts: make([]struct{ title, text string }, 200)}
	for i := range sb.arts {
		sb.arts[i].title, sb.arts[i].text = benchArticle(r, z, vocab)
	}
	return sb
}

// save saves the next article under a new URL.
func (sb *saveBench) save(b *testing.B) {
	a := sb.arts[sb.n%len(sb.arts)]
	_, _, err := Of(sb.st).SaveItem(b.Context(), sb.member, NewItem{URL: fmt.Sprintf("https://example.com/%d", sb.n), Title: a.title,
		Description: "about " + a.title, HTML: "<p>" + a.text + "</p>", Text: a.text})
	if err != nil {
		b.Fatal(err)
	}
	sb.n++
}

// cpuNanos is the process's CPU time so far (all goroutines: the
// indexer's, Badger's flushes and compactions): on a shared machine,
// steadier than the wall time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(0, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// steadyWindow is how many saves BenchmarkSaveArticleSteady times before it
// lets the indexer catch up: under the text backlog's bound (1,000), so
// that no save waits for the indexer (that is the imports' figure).
const steadyWindow = 900

// BenchmarkSaveArticleSteady is BenchmarkSaveArticle in a process and a
// store that have saved before: a first window of saves, untimed, grows
// the heap to what saving needs (BenchmarkSaveArticle's 900 saves in a
// fresh process pay its first touch of that memory: minor page faults,
// more the smaller the memtables, bench/README.md), then windows of
// steadyWindow saves, timed, the indexer caught up between them (its CPU
// counted in cpu-ns/op, its wall time not). Over 4,500 saves Badger
// flushes its memtable twice at the default 8 MiB, once at 16 MiB: the
// flushes are in the figure in proportion to what the saves write.
func BenchmarkSaveArticleSteady(b *testing.B) {
	sb := newSaveBench(b, false)
	for range steadyWindow {
		sb.save(b)
	}
	waitSearchIndexForBench(b, sb.st, sb.member)
	cpu0 := cpuNanos()
	b.ResetTimer()
	for i := range b.N {
		if i > 0 && i%steadyWindow == 0 {
			b.StopTimer()
			waitSearchIndexForBench(b, sb.st, sb.member)
			b.StartTimer()
		}
		sb.save(b)
	}
	b.StopTimer()
	waitSearchIndexForBench(b, sb.st, sb.member)
	b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
}
