//go:build linux

package storage

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Value-log garbage collection on a disk below the free-space reserve does
// not rewrite anything: Badger keeps the files it rewrote until the whole
// run has ended (the rewritten values are synced first), so a run on a
// nearly full disk wrote past its end, and the process died of SIGBUS in
// the memory-mapped log. Once space is freed it runs again and frees what
// it can.
func TestValueLogGCOnAFullDiskWaitsForSpace(t *testing.T) {
	badgerOnly(t)
	if testing.Short() {
		t.Skip("-short: fills a disk and waits for space")
	}
	const memTable, vlogFile = 256 << 10, 1 << 20
	fs := smallFilesystem(t, 1200<<20)
	dir := filepath.Join(fs, "store")
	st, err := Open(dir, Options{MemTableSize: memTable, ValueLogFileSize: vlogFile, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	// Values in the value log, three quarters of them written again three
	// times: enough flushes for compactions to find the garbage.
	value := make([]byte, 4<<10+100)
	const keys = 48000
	for round := range 4 {
		for i := 0; i < keys; i += 100 {
			if _, err := rand.Read(value); err != nil {
				t.Fatal(err)
			}
			err := st.Update(t.Context(), func(tx *Tx) error {
				for j := i; j < i+100; j++ {
					if round > 0 && j%4 == 0 {
						continue
					}
					if err := tx.put(fmt.Appendf(nil, "test/%05d", j), value, 0); err != nil {
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
	reserve := DefaultMinFreeBytes(memTable, vlogFile)
	filler := filepath.Join(fs, "filler")
	fill := func(leave int64) {
		t.Helper()
		if err := os.Remove(filler); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		free, _ := freeBytes(dir)
		if err := os.WriteFile(filler, make([]byte, free-leave), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Below the reserve: nothing is rewritten.
	fill(reserve - 512<<10)
	full, _ := freeBytes(dir)
	st.CollectGarbage() // died here
	if free, _ := freeBytes(dir); free < full {
		t.Fatalf("garbage collection below the reserve wrote %d bytes", full-free)
	}

	// Just above it: the run stops between files once the reserve is
	// reached, and the files it rewrote go at its end.
	fill(reserve + 1<<20)
	st.CollectGarbage() // died here too, writing on past the disk's end
	if free, _ := freeBytes(dir); free < reserve-vlogFile/2 {
		t.Fatalf("garbage collection left %d bytes free, below the reserve (%d) by more than one file's rewrite", free, reserve)
	}

	// With space freed it frees what it can.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	before, _ := freeBytes(dir)
	st.CollectGarbage()
	if after, _ := freeBytes(dir); after <= before {
		t.Fatalf("garbage collection with space freed: %d bytes free before, %d after", before, after)
	}
}
