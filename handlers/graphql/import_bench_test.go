package graphql_test

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Import speed: a 10,000-item Pocket CSV without fetching, and
// a 1,000-item Omnivore zip with content and highlights, each imported
// into an empty member of a store with sync_writes on (the default), from
// the upload's staging to the job's end (ns/op, items/s); indexed-ns/op runs
// to when the search index has caught up with the imported texts too.
// peak-heap-MiB is the largest heap
// in use seen while it ran (sampled every 10 ms, garbage included);
// peak-live-MiB the largest heap still reachable after a collection
// (every 200 ms), Badger's memtables and caches included, and
// peak-marked-MiB the largest the collection itself found live (without
// what was allocated while it ran). Figures:
// bench/README.md.

func BenchmarkImportPocketCSV10k(b *testing.B) {
	benchmarkImport(b, pocketCSV(b, 10000), 10000)
}

func BenchmarkImportOmnivoreZip1k(b *testing.B) {
	benchmarkImport(b, omnivoreZip(b, 1000), 1000)
}

// Four times the files: the time grows with them. So does the peak heap,
// Badger's table builders, not the import's (bench/README.md, "Imports").
func BenchmarkImportPocketCSV40k(b *testing.B) {
	benchmarkImport(b, pocketCSV(b, 40000), 40000)
}

func BenchmarkImportOmnivoreZip4k(b *testing.B) {
	benchmarkImport(b, omnivoreZip(b, 4000), 4000)
}

// Sixteen times (run with -benchtime 1x): the live heap did not level off.
func BenchmarkImportPocketCSV160k(b *testing.B) {
	benchmarkImport(b, pocketCSV(b, 160000), 160000)
}

func BenchmarkImportOmnivoreZip16k(b *testing.B) {
	benchmarkImport(b, omnivoreZip(b, 16000), 16000)
}

// HEARTH_IMPORT_ITEMS=n: files of any size (skipped without it).
func BenchmarkImportPocketCSVSized(b *testing.B) {
	n := importItems(b)
	benchmarkImport(b, pocketCSV(b, n), n)
}

func BenchmarkImportOmnivoreZipSized(b *testing.B) {
	n := importItems(b)
	benchmarkImport(b, omnivoreZip(b, n), n)
}

func importItems(b *testing.B) int {
	n, err := strconv.Atoi(os.Getenv("HEARTH_IMPORT_ITEMS"))
	if err != nil || n <= 0 {
		b.Skip("HEARTH_IMPORT_ITEMS is not a count of items")
	}
	return n
}

// HEARTH_IMPORT_HEAPPROFILE=file makes the benchmark write a heap profile
// (go tool pprof -sample_index=inuse_space) each time the live heap after a
// forced collection reaches a new peak: the last one written is the peak's.
var importHeapProfile = os.Getenv("HEARTH_IMPORT_HEAPPROFILE")

func writeHeapProfile(b *testing.B, name string) {
	f, err := os.Create(name)
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Error(err)
	}
}

func benchmarkImport(b *testing.B, file string, n int) {
	opts := storage.Options{GCInterval: -1}
	// HEARTH_IMPORT_MEMTABLE_MIB=n: the store's memtable_size in MiB
	// (default 8), the option that sets most of Badger's memory.
	if v, err := strconv.Atoi(os.Getenv("HEARTH_IMPORT_MEMTABLE_MIB")); err == nil && v > 0 {
		opts.MemTableSize = int64(v) << 20
	}
	st, err := storage.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	// Past the default limits (100,000 entries, 256 MiB) for the largest files.
	api := newAPI(st, options{NoImportFetch: true, ImportDir: filepath.Join(b.TempDir(), "staged"),
		ImportLimits: importer.Limits{MaxEntries: 1_000_000, MaxUploadBytes: 4 << 30}})
	defer api.Close()
	pk := samplePeaks(b)
	var indexed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		m, err := members.Of(st).CreateMember(b.Context(), fmt.Sprintf("member%d", i), "", "correct horse battery")
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(file)
		if err != nil {
			b.Fatal(err)
		}
		staged, err := api.Importer().Stage(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		job, err := api.Importer().Start(b.Context(), m.ID, staged, filepath.Base(file), importer.Auto, nil)
		if err != nil {
			b.Fatal(err)
		}
		for {
			j, err := library.Of(st).ImportJob(b.Context(), m.ID, job.ID)
			if err != nil {
				b.Fatal(err)
			}
			if j.Finished() {
				if j.Created != n || j.State != library.ImportDone {
					b.Fatalf("job: %+v", j)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Until the search index has caught up with the import's texts
		// (searches read finished segments only), outside ns/op: an import
		// that leaves its indexing for after the job and one that waits
		// for the indexer as it goes count the same work here.
		b.StopTimer()
		waitIndexed(b, st, m.ID)
		indexed += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
	b.ReportMetric(float64(indexed.Nanoseconds())/float64(b.N), "indexed-ns/op")
	pk.report(b)
}

// waitIndexed returns once memberID's search index has no work left.
func waitIndexed(b *testing.B, st *storage.Store, memberID string) {
	for {
		n, err := library.Of(st).SearchIndexBacklog(b.Context(), memberID)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// peaks samples the heap while a benchmark runs: peak-heap-MiB is the
// largest heap in use seen (every 10 ms, garbage included), peak-marked-MiB
// the largest heap a collection found live (without what was allocated
// while it ran), peak-rss-MiB the process's largest resident size
// meanwhile (Linux), of which peak-anon-MiB is the largest anonymous part
// seen (the heap, stacks, the runtime's own) and peak-file-MiB the largest
// part mapped from files (the binary's pages and Badger's memory-mapped
// memtable logs, tables and value log: page cache the kernel can take back).
// A collection is forced every 200 ms: peak-live-MiB is the largest heap
// still reachable after one (HeapAlloc).
type peaks struct {
	heap, live, marked atomic.Uint64
	anon, file         atomic.Uint64
	stop, done         chan struct{}
	rss                bool
}

// procStatus reads the fields of /proc/self/status named, in kB (0 for
// those it lacks).
func procStatus(names ...string) []uint64 {
	out := make([]uint64, len(names))
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(st), "\n") {
		for i, n := range names {
			if kb, ok := strings.CutPrefix(line, n+":"); ok {
				if v, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64); err == nil {
					out[i] = v
				}
			}
		}
	}
	return out
}

func storeMax(a *atomic.Uint64, v uint64) bool {
	if v > a.Load() {
		a.Store(v)
		return true
	}
	return false
}

func samplePeaks(b *testing.B) *peaks {
	p := &peaks{stop: make(chan struct{}), done: make(chan struct{})}
	// Linux's peak resident size (VmHWM) counted from here: writing 5 to
	// clear_refs resets it (proc(5)).
	p.rss = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	// What the collection found reachable, without what was allocated
	// while it ran (which HeapAlloc counts, and Badger's compactions
	// allocate fast): the live heap proper. The heap in use is its
	// objects and the free space of its spans in use (HeapInuse).
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}}
	go func() {
		defer close(p.done)
		var ms runtime.MemStats
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if i%20 == 19 {
				// What is still reachable: the garbage of a busy run is
				// collected, its working set is not.
				runtime.GC()
				runtime.ReadMemStats(&ms)
				if storeMax(&p.live, ms.HeapAlloc) && importHeapProfile != "" {
					writeHeapProfile(b, importHeapProfile)
				}
			}
			metrics.Read(samples)
			storeMax(&p.marked, samples[0].Value.Uint64())
			storeMax(&p.heap, samples[1].Value.Uint64()+samples[2].Value.Uint64())
			if p.rss {
				v := procStatus("RssAnon", "RssFile")
				storeMax(&p.anon, v[0])
				storeMax(&p.file, v[1])
			}
		}
	}()
	return p
}

// report stops the sampling and reports the peaks.
func (p *peaks) report(b *testing.B) {
	close(p.stop)
	<-p.done
	b.ReportMetric(float64(p.heap.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(p.live.Load())/(1<<20), "peak-live-MiB")
	b.ReportMetric(float64(p.marked.Load())/(1<<20), "peak-marked-MiB")
	if p.rss {
		if v := procStatus("VmHWM")[0]; v > 0 {
			b.ReportMetric(float64(v)/1024, "peak-rss-MiB")
		}
		b.ReportMetric(float64(p.anon.Load())/1024, "peak-anon-MiB")
		b.ReportMetric(float64(p.file.Load())/1024, "peak-file-MiB")
	}
}

// omnivoreZip writes an Omnivore export of n items in metadata files of
// 20, as its exporter does, each item with about 6 KB of content and two
// highlights with a note.
func omnivoreZip(b testing.TB, n int) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), "omnivore-export.zip")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	para := "Sourdough needs patience, warm water and a lively starter that doubles in size overnight. "
	for from := 0; from < n; from += 20 {
		var meta []map[string]any
		for i := from; i < min(from+20, n); i++ {
			slug := fmt.Sprintf("article-%d-%x", i, i*7919)
			meta = append(meta, map[string]any{
				"id": fmt.Sprintf("id-%d", i), "slug": slug, "title": fmt.Sprintf("Article %d", i),
				"description": "About bread", "author": "A. Baker", "url": fmt.Sprintf("https://site%d.example/a/%d", i%40, i),
				"state": []string{"Active", "Archived"}[i%2], "readingProgress": i % 100, "thumbnail": nil,
				"labels":  []string{"bread", fmt.Sprintf("batch%d", i%10)},
				"savedAt": time.Unix(1700000000+int64(i), 0).UTC().Format(time.RFC3339Nano), "updatedAt": time.Unix(1700000500+int64(i), 0).UTC().Format(time.RFC3339Nano),
				"publishedAt": nil,
			})
			w, _ := zw.Create("content/" + slug + ".html")
			fmt.Fprintf(w, `<DIV class="page" id="readability-page-1"><h1>Article %d</h1>`, i)
			for k := 0; k < 60; k++ {
				fmt.Fprintf(w, "<p>%s%d</p>", para, k)
			}
			w.Write([]byte("</DIV>"))
			w, _ = zw.Create("highlights/" + slug + ".md")
			fmt.Fprintf(w, "> %s3 \n\n#bread\n\nA note on %d\n\n> %s40 ", para, i, para)
		}
		w, _ := zw.Create(fmt.Sprintf("metadata_%d_to_%d.json", from, min(from+20, n)))
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(meta)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return p
}

// The benchmark's Omnivore file imports as the format says: highlights
// placed in the content with their notes.
func TestGeneratedOmnivoreZipImportsWithPlacedHighlights(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	data, err := os.ReadFile(omnivoreZip(t, 30))
	if err != nil {
		t.Fatal(err)
	}
	status, out := upload(t, e.srv.URL, e.token, "omnivore.zip", data, "")
	if status != 201 || out["format"] != "OMNIVORE" {
		t.Fatalf("HTTP %d %v", status, out)
	}
	job := waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	if job.Created != 30 {
		t.Fatalf("job %+v", job)
	}
	var hs []*library.Highlight
	library.Of(e.store).ForEachHighlight(t.Context(), e.member.ID, func(h *library.Highlight) error { hs = append(hs, h); return nil })
	if len(hs) != 60 {
		t.Fatalf("%d highlights", len(hs))
	}
	for _, h := range hs {
		s := h.Segments[0]
		if !strings.HasPrefix(s.XPath, "/div[1]/p[") || s.EndOffset-s.StartOffset != len([]rune(s.Text)) || !strings.Contains(s.Text, "Sourdough needs patience") {
			t.Fatalf("highlight not placed: %+v", s)
		}
	}
}
