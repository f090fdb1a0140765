//go:build linux

package storage

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
)

// smallFilesystem mounts a tmpfs of size bytes (root only) and returns its
// directory; it is unmounted at the end of the test.
func smallFilesystem(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// On a filesystem that fills up, writes are refused with ErrDiskFull
// before Badger runs out of room (without the reserve the process died of
// SIGBUS in Badger's memory-mapped logs), every acknowledged write stays
// readable, the store closes and opens again on the full disk, and writes
// resume once space is freed.
func TestDiskFullRefusesWritesKeepsReadsAndRecovers(t *testing.T) {
	badgerOnly(t)
	const memTable, vlogFile = 8 << 20, 4 << 20
	fs := smallFilesystem(t, 128<<20)
	dir := filepath.Join(fs, "store")
	opts := Options{MemTableSize: memTable, ValueLogFileSize: vlogFile}
	st, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	// Space that an operator frees later.
	filler := filepath.Join(fs, "filler")
	if err := os.WriteFile(filler, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	value := make([]byte, 64<<10) // random: Badger compresses its tables
	if _, err := rand.Read(value); err != nil {
		t.Fatal(err)
	}
	var acked []string
	var fullErr error
	for i := range 10000 {
		k := fmt.Sprintf("test/%05d", i)
		err := st.Update(t.Context(), func(tx *Tx) error { return tx.put([]byte(k), value, 0) })
		if err != nil {
			fullErr = err
			break
		}
		acked = append(acked, k)
	}
	if !errors.Is(fullErr, ErrDiskFull) {
		t.Fatalf("after %d writes: %v, want ErrDiskFull", len(acked), fullErr)
	}
	if status, _, ok := Unavailable(fullErr); !ok || status != 507 {
		t.Fatalf("Unavailable(ErrDiskFull) = %d, %v", status, ok)
	}
	if free, _ := freeBytes(dir); free >= DefaultMinFreeBytes(memTable, vlogFile) {
		t.Fatalf("refused with %d bytes free", free)
	}
	checkAll := func(st *Store) {
		t.Helper()
		err := st.View(t.Context(), func(tx *Tx) error {
			for _, k := range acked {
				v, err := tx.get([]byte(k))
				if err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
				if string(v) != string(value) {
					return fmt.Errorf("%s: damaged", k)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("reading the %d acknowledged writes: %v", len(acked), err)
		}
	}
	checkAll(st)
	// Badger's flushes and compactions free some space now and then, so
	// the free space hovers around the reserve: take it well below.
	reserve := DefaultMinFreeBytes(memTable, vlogFile)
	if free, _ := freeBytes(dir); free > reserve/2 {
		if err := os.WriteFile(filepath.Join(fs, "filler2"), make([]byte, free-reserve/2), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Still refused, and nothing changes: the process keeps running.
	if err := st.Update(t.Context(), func(tx *Tx) error { return tx.put([]byte("test/more"), value, 0) }); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a second write: %v", err)
	}

	// Restart on the full disk.
	if err := st.Close(); err != nil {
		t.Fatalf("close on a full disk: %v", err)
	}
	if st, err = Open(dir, opts); err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	checkAll(st)
	if err := st.Update(t.Context(), func(tx *Tx) error { return tx.put([]byte("test/more"), value, 0) }); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a write after the restart: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(fs, "filler2")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := st.Update(t.Context(), func(tx *Tx) error { return tx.put([]byte("test/more"), value, 0) }); err != nil {
		t.Fatalf("a write once space was freed: %v", err)
	}
	acked = append(acked, "test/more")
	checkAll(st)
	t.Logf("%d writes acknowledged before the reserve was reached", len(acked)-1)
}

// A closed store answers ErrClosed (503), never Badger's "DB Closed" panic,
// and Close waits for the operations running.
func TestClosedStoreAnswersErrClosed(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := key("test", "closed")
	if err := st.Update(t.Context(), func(tx *Tx) error { return tx.Put(k, []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	inView := make(chan struct{})
	release := make(chan struct{})
	viewDone := make(chan error)
	go func() {
		viewDone <- st.View(t.Context(), func(tx *Tx) error {
			close(inView)
			<-release
			_, err := tx.get([]byte("anything"))
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
			return err
		})
	}()
	<-inView
	closed := make(chan error)
	go func() { closed <- st.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a read was running")
	default:
	}
	close(release)
	if err := <-viewDone; err != nil {
		t.Fatalf("the read running during Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := st.View(t.Context(), func(tx *Tx) error { _, err := tx.Get(k); return err }); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if err := st.Update(t.Context(), func(tx *Tx) error { return tx.Put(key("test", "other"), nil, 0) }); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	if status, _, ok := Unavailable(fmt.Errorf("wrapped: %w", ErrClosed)); !ok || status != 503 {
		t.Fatalf("Unavailable(ErrClosed) = %d, %v", status, ok)
	}
}

// The operator learns of a full disk from the log, not only from members:
// the first write refused logs one warning naming the directory, the free
// space and the reserve (not one per refused write, which would fill what
// is left of the disk), and the first reading above the reserve again logs
// that writes resume.
func TestDiskFullIsLoggedOnceAndSoIsItsEnd(t *testing.T) {
	badgerOnly(t)
	const reserve = 32 << 20
	fs := smallFilesystem(t, 96<<20)
	dir := filepath.Join(fs, "store")
	core, logs := observer.New(zap.InfoLevel)
	st, err := Open(dir, Options{MemTableSize: 8 << 20, ValueLogFileSize: 4 << 20, MinFreeBytes: reserve, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	write := func() error {
		return st.Update(t.Context(), func(tx *Tx) error { return tx.put([]byte("test/k"), []byte("v"), 0) })
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	free, _ := freeBytes(dir)
	filler := filepath.Join(fs, "filler")
	if err := os.WriteFile(filler, make([]byte, free-reserve+(4<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(spaceCheckEvery) // the last reading is no longer trusted
	for range 5 {
		if err := write(); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("a write on a full disk: %v", err)
		}
	}
	warned := logs.FilterMessageSnippet("below its free-space reserve").All()
	if len(warned) != 1 || warned[0].Level != zap.WarnLevel {
		t.Fatalf("%d warnings for 5 refused writes (%v), want 1", len(warned), logs.All())
	}
	f := warned[0].ContextMap()
	if f["storage_dir"] != dir || f["min_free_bytes"] != int64(reserve) || f["free_bytes"].(int64) >= reserve {
		t.Fatalf("warning fields %v", f)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := write(); err != nil {
		t.Fatalf("a write once space was freed: %v", err)
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessageSnippet("writes resume").Len(); n != 1 {
		t.Fatalf("%d lines saying writes resume, want 1: %v", n, logs.All())
	}
}
