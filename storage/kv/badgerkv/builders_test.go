package badgerkv

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// The memory Badger's table builders take while the store is written (an
// import, any busy member) is set by the engine's options, not by how much
// the store holds (docs/import.md "Speed and memory",
// bench/README.md "Import memory bounded by the store's options").
func TestBuilderMemoryIsBoundedByTheOptions(t *testing.T) {
	e, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bound := builderBound(t, e.db.Opts())
	t.Logf("table builders: at most %d MiB", bound>>20)
	// 247 MiB with 8 MiB memtables (375 with 16 MiB): the figure docs/import.md gives.
	if bound > 256<<20 {
		t.Fatalf("table builders may take %d MiB with the default options", bound>>20)
	}
}

// A burst of writes the size of a 10,000-item import (about 25 MiB of
// tables) is flushed to level 0 without a compaction beside it: the
// compaction's table builders and the pages of the tables it rewrites
// were most of such an import's peak memory (levelZeroTables).
func TestBurstFlushedWithoutCompaction(t *testing.T) {
	e, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	value := bytes.Repeat([]byte("x"), 300)
	const perTx, total = 200, 28 << 20
	for i := 0; i*len(value) < total; i += perTx {
		err := e.Update(context.Background(), kv.TxOptions{}, func(w kv.Writer) error {
			for j := i; j < i+perTx; j++ {
				if err := w.Put([]byte(fmt.Sprintf("item/%08d", j)), value, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Three memtables' worth flushed, and time for a compaction to start
	// as it would after the second with two level-0 tables.
	for range 100 {
		if len(e.DB().Tables()) >= 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	tables := e.DB().Tables()
	if len(tables) < 3 {
		t.Fatalf("%d tables flushed of 28 MiB written", len(tables))
	}
	for _, ti := range tables {
		if ti.Level != 0 {
			t.Fatalf("a compaction ran during the burst: table %d on level %d (of %d tables)", ti.ID, ti.Level, len(tables))
		}
	}
}

// builderBound checks the options that keep Badger's (v4.9.6) table
// builders from growing with the store, and returns what they may hold at
// most. A builder holds the whole table it writes in a z.Allocator (buffers
// doubling from 2×BaseTableSize rounded up to a power of two) until the
// table is on disk (table/builder.go):
//
//   - uncompressed, ReachedCapacity counts what the builder holds (with
//     compression it counts compressed bytes: the builder holds the
//     compression ratio times more, and the block's compression buffer);
//   - one table size at every level (TableSizeMultiplier 1; otherwise a
//     level's tables are twice as large as the level above's, growing
//     with the store);
//   - values below ValueThreshold stay in the tables and fill their blocks
//     at least 3/4 when BlockSize ≥ 4×ValueThreshold (a larger value
//     alone in a block regrows its buffer up to 3× its size; from the
//     threshold, values go to the value log, which compactions do not
//     rewrite).
//
// So a compaction's builder holds at most 4/3 × BaseTableSize plus one
// entry, in its first buffer, and 3 MiB of index (buildIndex's flatbuffers
// builder) when it finishes; a memtable flush's builder holds one
// memtable's entries (≤ 4/3 × MemTableSize) in doubling buffers. At most
// NumCompactors × (8 + 5 splits) compaction builders run at once
// (compactBuildTables' throttle, addSplits' 5), with one flush, and the
// allocator pool keeps 8 returned allocators with their buffers
// (z.NewAllocatorPool(8) in db.go), grown at worst by flushes.
func builderBound(t *testing.T, o badger.Options) int64 {
	t.Helper()
	if o.Compression != options.None {
		t.Errorf("compression %v: a builder holds up to the compression ratio times its table", o.Compression)
	}
	if o.TableSizeMultiplier != 1 {
		t.Errorf("TableSizeMultiplier %d: deeper levels' tables, and their builders, grow with the store", o.TableSizeMultiplier)
	}
	if int64(o.BlockSize) < 4*o.ValueThreshold {
		t.Errorf("BlockSize %d < 4 × ValueThreshold %d: blocks of values near the threshold are half empty", o.BlockSize, o.ValueThreshold)
	}
	if o.ValueThreshold != ValueThreshold {
		t.Errorf("Badger's ValueThreshold %d is not the engine's %d (the group commit relies on it)", o.ValueThreshold, ValueThreshold)
	}
	first := int64(1)
	for first < 2*o.BaseTableSize {
		first *= 2
	}
	if need := 4*o.BaseTableSize/3 + o.ValueThreshold + int64(o.BlockSize); need > first {
		t.Errorf("a compaction's table (%d bytes) does not fit its builder's first buffer (%d)", need, first)
	}
	flush, buf := first, first
	for flush < 4*o.MemTableSize/3+int64(o.BlockSize) {
		buf *= 2
		flush += buf
	}
	const pooled, index = 8, 3 << 20
	running := int64(o.NumCompactors*(8+5) + 1)
	return pooled*flush + running*(first+index)
}

// A storage_dir written with the earlier options (Snappy-compressed tables,
// ×2 table sizes, 4 KiB blocks, values under 1 MiB in the tables) opens with
// today's and reads back whole, before and after its tables are rewritten:
// each table's compression is in Badger's manifest (levels.go reads
// tf.Compression), block size in the table's index, and the value
// threshold decides only where new writes go.
func TestOpensDirWrittenWithEarlierOptions(t *testing.T) {
	dir := t.TempDir()
	old := badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(8 << 20).WithNumMemtables(2).
		WithNumLevelZeroTables(2).WithNumLevelZeroTablesStall(8).WithNumCompactors(2).
		WithValueThreshold(1 << 20).WithCompression(options.Snappy).WithMetricsEnabled(false)
	db, err := badger.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	value := func(i int) []byte {
		return []byte(strings.Repeat(fmt.Sprintf("<p>article %d, some compressible text. </p>", i), 150)) // ~6 KB
	}
	const n = 4000 // ~24 MB: several tables
	for i := range n {
		if err := db.Update(func(tx *badger.Txn) error { return tx.Set([]byte(fmt.Sprintf("item/%05d", i)), value(i)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("the earlier options left no table to read")
	}

	e, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check := func(when string) {
		t.Helper()
		err := e.View(context.Background(), func(r kv.Reader) error {
			for i := range n {
				v, err := r.Get([]byte(fmt.Sprintf("item/%05d", i)))
				if err != nil || !bytes.Equal(v, value(i)) {
					return fmt.Errorf("item/%05d: %d bytes, %v", i, len(v), err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	compressed := func(skip map[uint64]bool) (n, tables int) {
		for _, ti := range e.DB().Tables() {
			if skip[ti.ID] {
				continue
			}
			tables++
			if uint64(ti.OnDiskSize) < uint64(ti.UncompressedSize)/2 {
				n++
			}
		}
		return n, tables
	}
	if n, _ := compressed(nil); n == 0 {
		t.Fatalf("no compressed table to read: %+v", e.DB().Tables())
	}
	before := map[uint64]bool{}
	for _, ti := range e.DB().Tables() {
		before[ti.ID] = true
	}
	check("opened")
	// Tables a compaction writes follow today's options: uncompressed.
	// (Flatten moves what is not on one level yet; when the earlier store
	// ended with every table on one level, it rewrites nothing.)
	if err := e.DB().Flatten(2); err != nil {
		t.Fatal(err)
	}
	if n, rewritten := compressed(before); n != 0 {
		t.Errorf("%d of the %d tables the compaction wrote are compressed", n, rewritten)
	} else {
		t.Logf("the compaction wrote %d tables, none compressed", rewritten)
	}
	check("after compaction")
}
