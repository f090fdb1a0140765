package storagetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hearthkit/caddy-hearth/storage"
)

// SmallDisk is a filesystem of its own for a store, which a test fills up
// as a self-hoster's disk fills: a tmpfs, mounted for the test (root only:
// the test is skipped otherwise, or where root may not mount; CI runs as
// root with that right) and unmounted when it ends.
type SmallDisk struct {
	t   testing.TB
	Dir string // the mount point; a store goes in a directory under it
}

// NewSmallDisk mounts a tmpfs of size bytes.
func NewSmallDisk(t testing.TB, size int64) *SmallDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	dir := t.TempDir()
	err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size))
	if errors.Is(err, unix.EPERM) {
		// Root in a container without the right to mount (no
		// CAP_SYS_ADMIN) is as unable as any other user.
		t.Skipf("mounting a small filesystem was refused: %v", err)
	}
	if err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &SmallDisk{t: t, Dir: dir}
}

// Fill writes a file that leaves about leave bytes free, and returns the
// function that deletes it (the operator freeing space). It then waits a
// little longer than a store trusts its last reading of the free space
// (storage's spaceCheckEvery), so that the next write sees the full disk.
func (d *SmallDisk) Fill(leave int64) (free func()) {
	d.t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(d.Dir, &st); err != nil {
		d.t.Fatal(err)
	}
	avail := int64(st.Bavail) * int64(st.Bsize)
	if avail <= leave {
		d.t.Fatalf("%d bytes free, fewer than the %d to leave", avail, leave)
	}
	name := filepath.Join(d.Dir, fmt.Sprintf("filler-%d", time.Now().UnixNano()))
	if err := os.WriteFile(name, make([]byte, avail-leave), 0o600); err != nil {
		d.t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	return func() {
		d.t.Helper()
		if err := os.Remove(name); err != nil {
			d.t.Fatal(err)
		}
	}
}

// Store opens a store on the disk that refuses writes below reserve free
// bytes (storage.Options.MinFreeBytes), logging to log (nil: the
// default), with small tables and value-log files so that a test meets
// the full disk within a few megabytes; it is closed when the test ends.
func (d *SmallDisk) Store(reserve int64, log *zap.Logger) *storage.Store {
	d.t.Helper()
	st, err := storage.Open(d.StoreDir(), d.Options(reserve, log))
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { st.Close() })
	return st
}

// StoreDir is the directory of the disk's store (Store).
func (d *SmallDisk) StoreDir() string { return filepath.Join(d.Dir, "store") }

// Options are the options Store opens the disk's store with, for a test
// that opens it another way (OpenInterleavedIn).
func (d *SmallDisk) Options(reserve int64, log *zap.Logger) storage.Options {
	noSync := false
	return storage.Options{SyncWrites: &noSync, GCInterval: -1,
		MemTableSize: 1 << 20, ValueLogFileSize: 1 << 20, MinFreeBytes: reserve, Logger: log}
}
