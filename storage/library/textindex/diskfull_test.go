//go:build linux

package textindex

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// While the disk is full the indexer logs the store's refusal once, not
// once a pass (a writer waiting for its backlog urged a pass every few
// milliseconds: 484 warnings in ten seconds in an import that met a full
// disk), says it waits so that such a writer stops waiting, and indexes
// the refused work by itself once the store's wait is over, not only at
// the next change, which may never come.
func TestIndexerOnAFullDiskLogsOnceAndGoesOnByItself(t *testing.T) {
	if storagetest.OnPostgres() {
		t.Skip("a full disk is Badger's (PostgreSQL's server minds its own)")
	}
	const reserve = 16 << 20
	disk := storagetest.NewSmallDisk(t, 64<<20)
	core, logs := observer.New(zap.InfoLevel)
	st := disk.Store(reserve, zap.New(core))
	put(t, st, "a", "sourdough needs patience")
	freeSpace := disk.Fill(reserve / 2)

	var passes atomic.Int64
	var ix *Indexer
	never := func() bool { return false }
	ix = NewIndexer(st, IndexerConfig{
		All: func() ([]string, error) { return nil, nil },
		Work: func(string) error {
			passes.Add(1)
			return testIndex.Build(st, docs{}, ix.Stopping, never)
		},
		Delay: func() time.Duration { return 0 },
	})
	ix.Start()
	defer ix.Stop()
	for passes.Load() < 20 {
		ix.Urge("k")
		time.Sleep(time.Millisecond)
	}
	if n := logs.FilterLevelExact(zap.WarnLevel).FilterMessageSnippet("search index").Len(); n != 1 {
		t.Fatalf("%d warnings of the search index for %d refused passes, want 1: %v", n, passes.Load(), logs.All())
	}
	if !ix.WaitsForStore() {
		t.Fatal("the indexer does not say it waits for the store")
	}
	if n := backlog(t, st); n == 0 {
		t.Fatal("indexed on a full disk")
	}

	freeSpace()
	ix.RetryRefused() // the store's wait is over (a minute on a full disk)
	storagetest.Eventually(t, "the refused text indexed", func() bool { return backlog(t, st) == 0 })
	if got := candidates(t, st, "patience"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("candidates of patience: %v", got)
	}
	if ix.WaitsForStore() {
		t.Fatal("the indexer still waits for the store")
	}
}
