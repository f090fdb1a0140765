package directory

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
	"github.com/hearthkit/caddy-hearth/storage/agents/agentstest"
)

// Benchmarks of the directory's performance targets; figures and commands are in
// bench/README.md ("hearth_directory").
//
//	go test -tags nobadger,nomysql,nopgx -run '^$' -bench . -benchmem ./handlers/directory/

// benchDirs are the seeded stores shared by the runs of one benchmark (the
// framework calls a benchmark several times with growing b.N; seeding
// 100 k agents each time would dominate the run). TestMain removes them.
var benchDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	pgNodes.Stop()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

var seeded = map[string]*storage.Store{}

// seededStore returns a store (fsync off, only for seeding speed) holding
// n agents with made-up pubkeys and a week of activity each, seeded once
// per process.
func seededStore(b *testing.B, n int) *storage.Store {
	b.Helper()
	name := "agents-" + strconv.Itoa(n)
	if s, ok := seeded[name]; ok {
		return s
	}
	dir, err := os.MkdirTemp("", "hearth-directory-bench-")
	if err != nil {
		b.Fatal(err)
	}
	benchDirs = append(benchDirs, dir)
	off := false
	s, err := storage.Open(dir, storage.Options{GCInterval: -1, SyncWrites: &off})
	if err != nil {
		b.Fatal(err)
	}
	if err := seedAgents(s, n, t0); err != nil {
		b.Fatal(err)
	}
	seeded[name] = s
	return s
}

// seedAgents writes n agents registered 10 days before now with random
// pubkeys, realistic field sizes and posts on 3 days, directly through
// storage (no signatures: the document does not check them).
func seedAgents(s *storage.Store, n int, now time.Time) error {
	rules := newActivityRules(Options{}.withDefaults())
	posts := make([]agents.Post, 0, 1000)
	flush := func() error {
		if len(posts) == 0 {
			return nil
		}
		_, err := agents.Of(s).RecordPosts(context.Background(), posts, func(a *agents.Agent, act *agents.Activity, p agents.Post) error {
			return rules.apply(a, act, p, now)
		})
		posts = posts[:0]
		return err
	}
	reg := now.Add(-10 * day).Unix()
	for i := 0; i < n; i++ {
		a := agentstest.Agent(i, reg, `[["d","agent"],["name","agent"],["purpose","Summarizes the day's papers on distributed systems"],["capability","summarize"],["capability","search"],["capability","reply"],["operator","operator@example.org"],["nonce","1234567","20"]]`)
		pk := a.Pubkey
		if i%4 == 0 {
			a.NIP05, a.NIP05Verified, a.NIP05OKAt = fmt.Sprintf("agent%d@example.org", i), true, now.Unix()
		}
		if _, err := agents.Of(s).Register(context.Background(), a, func(*agents.Agent) error { return nil }); err != nil {
			return err
		}
		for dd := 1; dd <= 3; dd++ {
			posts = append(posts, agents.Post{ID: agentstest.RandomHex(32), Pubkey: pk, CreatedAt: now.Add(-time.Duration(dd) * day).Unix(), Skeleton: uint64(dd)})
		}
		if len(posts) >= 900 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// leading100k is a Directory over a store of 100 k agents (seededStore),
// closed when the benchmark ends, with regenerateDelay (0: the default).
// It leads (the one process on a Badger store): each rebuild also
// publishes the document for other nodes. It returns once it holds the
// lease and has made its first rebuild (buildMu), so that a benchmark
// times only its own.
func leading100k(b *testing.B, regenerateDelay time.Duration) (*Directory, *storage.Store) {
	b.Helper()
	s := seededStore(b, 100_000)
	d, err := New(s, Options{Now: func() time.Time { return t0 }, RegenerateEvery: time.Hour, RegenerateDelay: regenerateDelay, Fetcher: offlineFetcher()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	for d.leads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := d.Rebuild(b.Context()); err != nil {
		b.Fatal(err)
	}
	return d, s
}

// BenchmarkBuildDocument100k rebuilds the document of 100 k agents with
// every entry encoded again: from-memory computes every entry (levels,
// flags) from the records the leader keeps, sorts, encodes and hashes;
// from-store first reads and decodes every record, as when a node starts
// leading. Each op is one full rebuild.
func BenchmarkBuildDocument100k(b *testing.B) {
	d, _ := leading100k(b, 0)
	for _, fromStore := range []bool{false, true} {
		name := "from-memory"
		if fromStore {
			name = "from-store"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				// Forget the last agents list and where its entries
				// lie, so the rebuild encodes every entry and
				// publishes a new document (it keeps the size hint).
				d.buildMu.Lock()
				doc := *d.doc.Load()
				doc.agentsSum, doc.chunks = [32]byte{}, nil // assemble every chunk again
				d.doc.Store(&doc)
				for _, rec := range d.records.byPK {
					rec.json, rec.changesAt = nil, 0 // compute and encode every entry again
				}
				d.buildMu.Unlock()
				if fromStore {
					d.records.touchAll()
				}
				if err := d.Rebuild(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if v, err := d.publishedVersion(b.Context()); err != nil || v == "" || v != d.published {
				b.Fatalf("the last rebuild was not published: %q (%v), published %q", v, err, d.published)
			}
			doc := d.doc.Load()
			b.ReportMetric(float64(doc.size)/(1<<20), "MiB/doc")
			if doc.count != 100_000 {
				b.Fatalf("document has %d agents", doc.count)
			}
		})
	}
}

// BenchmarkRebuildAfterOneChange100k is the rebuild after one agent of
// 100 k posted: that agent's records read again, every entry's level and
// flags computed from the records in memory, only the changed entry
// encoded (the others copied from the document served). Each op is one
// post recorded and one rebuild.
func BenchmarkRebuildAfterOneChange100k(b *testing.B) {
	// The benchmark rebuilds after each change itself: the debounced
	// rebuild the change also schedules would be a second one.
	d, s := leading100k(b, time.Hour)
	pks, err := agents.Of(s).Authors(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := agents.Post{ID: agentstest.RandomHex(32), Pubkey: pks[i%len(pks)].Pubkey, CreatedAt: t0.Add(-time.Duration(i%600) * time.Minute).Unix()}
		if _, err := d.recordPosts(b.Context(), []agents.Post{p}, t0); err != nil {
			b.Fatal(err)
		}
		d.changedAgents(p.Pubkey)
		if err := d.Rebuild(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishDocument100k is the leader's publication alone of the
// document of 100 k agents, what each rebuild that changed the document
// adds since several nodes share it: in-process, as on Badger (a pointer
// in memory and a notification), and through-store, as with PostgreSQL
// (compress, write its parts and record, notify; here into Badger). Each op
// is one publication.
func BenchmarkPublishDocument100k(b *testing.B) {
	d, s := leading100k(b, 0)
	doc := d.doc.Load()
	b.Run("in-process", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d.buildMu.Lock()
			err := d.publishLocked(b.Context(), doc, true, t0)
			d.buildMu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(doc.size)/(1<<20), "MiB/doc")
	})
	b.Run("through-store", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, err := agents.Of(s).PublishDocument(b.Context(), d.id, &agents.PublishedDirectory{
				ETag: doc.etag, GeneratedAt: doc.generatedAt.Unix(), Count: doc.count, Body: doc.bytes(),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(doc.size)/(1<<20), "MiB/doc")
	})
}

// BenchmarkIngest records signed kind-1 posts of 1 000 registered agents
// (their records holding their registration events, as the directory
// writes them) through Ingest (id and signature checks, skeletons, the
// group commit), with the store's default sync_writes on. Each op is one
// event.
// clients=16 is single-event calls from 16 goroutines at once, as 16 HTTP
// clients posting one note each would make them; clients=4 four sources
// of batches.
func BenchmarkIngest(b *testing.B) {
	for _, batch := range []int{1, 100, 256} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) { benchIngest(b, batch, 1) })
	}
	b.Run("batch=1,clients=16", func(b *testing.B) { benchIngest(b, 1, 16) })
	// Batches from several sources at once (relays, HTTP clients): one's
	// checks run while another's posts are written.
	b.Run("batch=256,clients=4", func(b *testing.B) { benchIngest(b, 256, 4) })
}

// BenchmarkVerifySignatures is the limit of BenchmarkIngest: the id and
// signature checks of the same events alone, on every core, 256 at a time.
// Each op is one event.
func BenchmarkVerifySignatures(b *testing.B) {
	_, evts := ingestSetup(b, false)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < len(evts); i += 256 {
		for _, err := range verifyEvents(evts[i:min(i+256, len(evts))], func(*nostr.Event) bool { return true }) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// ingestSetup returns a Directory over a store with 1 000 registered agents
// (unless store is false: then only the signed events) and b.N signed posts
// of theirs.
func ingestSetup(b *testing.B, store bool) (*Directory, []*nostr.Event) {
	const nAgents = 1000
	keys := benchKeys(b, nAgents)
	now := t0
	var d *Directory
	if store {
		s, err := storage.Open(b.TempDir(), storage.Options{GCInterval: -1}) // sync_writes on, as in production
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		for _, k := range keys {
			// As registered through the directory: the raw registration
			// event is part of the record the ingest reads.
			reg := regEvent(b, k, now.Add(-30*day), "agent", nostr.Tag{"capability", "summarize"}, nostr.Tag{"capability", "search"})
			a := &agents.Agent{Pubkey: k.pk, Name: "agent", Purpose: "Summarizes the day's papers on distributed systems.",
				Capabilities: []string{"summarize", "search"}, FirstRegisteredAt: int64(reg.CreatedAt), RegisteredAt: int64(reg.CreatedAt),
				RegistrationEvent: reg.ID, UpdatedAt: int64(reg.CreatedAt), Event: mustJSON(b, reg)}
			if _, err := agents.Of(s).Register(b.Context(), a, func(*agents.Agent) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		d, err = New(s, Options{Now: func() time.Time { return now }, RegenerateEvery: time.Hour, Fetcher: offlineFetcher()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
	}
	// Signing is slow and not what is measured: sign every event first.
	evts := make([]*nostr.Event, b.N)
	for i := range evts {
		k := keys[i%nAgents]
		at := now.Add(-time.Duration(i%(7*24*60)) * time.Minute)
		evts[i] = sign(b, k, &nostr.Event{Kind: nostr.KindTextNote, CreatedAt: nostr.Timestamp(at.Unix()),
			Content: fmt.Sprintf("Today's summary #%d: three papers on consensus, see https://example.org/p/%d and nostr:npub1xyz for details.", i, i)})
	}
	return d, evts
}

func benchIngest(b *testing.B, batch, clients int) {
	d, evts := ingestSetup(b, true)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(int64(batch)) - int64(batch))
				if i >= len(evts) {
					return
				}
				res, err := d.Ingest(b.Context(), evts[i:min(i+batch, len(evts))])
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range res {
					if !r.OK || r.Message != "" {
						b.Errorf("event refused: %q", r.Message)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// benchKeys generates n key pairs once per process.
func benchKeys(b *testing.B, n int) []agentKey {
	for len(benchKeyPool) < n {
		benchKeyPool = append(benchKeyPool, newAgent(b))
	}
	return benchKeyPool[:n]
}

var benchKeyPool []agentKey
