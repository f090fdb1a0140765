package badgerkv

import (
	"testing"

	"github.com/dgraph-io/badger/v4/options"
)

// The engine opens Badger with storage.Open's options, including those
// that keep its table builders' memory from growing with the store
// (storage's TestBuilderMemoryIsBoundedByTheOptions has the reasoning and
// the bound; docs/import.md "Speed and memory").
func TestBuilderMemoryIsBoundedByTheOptions(t *testing.T) {
	e, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	o := e.db.Opts()
	if o.Compression != options.None || o.TableSizeMultiplier != 1 || o.BaseTableSize != 1<<20 || o.BlockSize != 16<<10 ||
		o.ValueThreshold != ValueThreshold || ValueThreshold != 4<<10 || o.NumCompactors != 2 || o.MemTableSize != DefaultMemTableSize {
		t.Fatalf("compression %v, table size %d ×%d a level, blocks %d, value threshold %d, %d compactors, memtables %d: not storage.Open's",
			o.Compression, o.BaseTableSize, o.TableSizeMultiplier, o.BlockSize, o.ValueThreshold, o.NumCompactors, o.MemTableSize)
	}
}
