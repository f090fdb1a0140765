package storage_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// Input that is not a complete backup is refused with ErrNotBackup, without
// a panic, and the store it was to replace keeps its data: an empty file, a
// text file, a backup cut short at any point (inside a record, between
// records, inside the end record), with bytes after the end, or the backup
// of an empty store.
func TestRestoreRefusesWhatIsNotACompleteBackup(t *testing.T) {
	storage.BadgerOnly(t)
	src := storagetest.Open(t)
	for i := range 20 {
		if _, err := members.Of(src).CreateMember(t.Context(), fmt.Sprint("member", i), strings.Repeat("d", 20), "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	b := storagetest.Backup(t, src)
	endLen := 8 + len(storage.BackupEndMagic) + 8 + storage.BackupChecksumLen
	firstFrame := len(storage.BackupMagic) + 8 + int(binary.LittleEndian.Uint64(b[len(storage.BackupMagic):]))
	miscounted := append([]byte(nil), b...)
	countAt := len(b) - storage.BackupChecksumLen - 8
	binary.LittleEndian.PutUint64(miscounted[countAt:], binary.LittleEndian.Uint64(b[countAt:])+1)
	oneEmptyFrame := binary.LittleEndian.AppendUint64(nil, 0)
	oneEmptyFrame = binary.LittleEndian.AppendUint64(oneEmptyFrame, storage.BackupEndMarker)
	oneEmptyFrame = append(oneEmptyFrame, storage.BackupEndMagic...)
	oneEmptyFrame = binary.LittleEndian.AppendUint64(oneEmptyFrame, 8)
	emptyBackup := storagetest.Backup(t, storagetest.Open(t))

	dir := filepath.Join(t.TempDir(), "store")
	live, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(live).CreateMember(t.Context(), "keeper", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	live.Close()

	for name, input := range map[string][]byte{
		"empty file":               nil,
		"text file":                []byte(strings.Repeat("root:x:0:0:root:/root:/bin/bash\n", 40)),
		"huge first length":        binary.LittleEndian.AppendUint64(nil, 1<<40),
		"cut inside a record":      b[:firstFrame/2],
		"cut after the first one":  b[:firstFrame],
		"cut before the end":       b[:len(b)-endLen],
		"cut inside the end":       b[:len(b)-storage.BackupChecksumLen-5],
		"cut inside the checksum":  b[:len(b)-5],
		"no checksum":              b[:len(b)-storage.BackupChecksumLen],
		"header only":              b[:len(storage.BackupMagic)],
		"format 1, cut short":      b[len(storage.BackupMagic) : len(b)-storage.BackupChecksumLen-3],
		"bytes after the end":      append(append([]byte(nil), b...), 0),
		"miscounted end":           miscounted,
		"backup of an empty store": emptyBackup,
		"one empty frame":          oneEmptyFrame,
	} {
		prev, err := storage.RestoreDir(dir, bytes.NewReader(input), storage.Options{})
		if !errors.Is(err, storage.ErrNotBackup) || prev != "" {
			t.Errorf("%s: RestoreDir = %q, %v; want ErrNotBackup", name, prev, err)
		}
	}
	// A file that is not a backup at all says so, rather than how it
	// fails when read as one from before the backup header.
	for name, tc := range map[string]struct {
		input []byte
		want  string
	}{
		"empty file":  {nil, "not a complete Hearth backup: the file is empty"},
		"text file":   {[]byte(strings.Repeat("root:x:0:0:root:/root:/bin/bash\n", 40)), "this file is not a Hearth backup (a backup made by caddy hearth backup starts with the line HEARTH-BACKUP-3"},
		"a few bytes": {[]byte("hi\n"), "this file is not a Hearth backup"},
		"a gzip file": {[]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"), "this file is not a Hearth backup"},
	} {
		if _, err := storage.RestoreDir(dir, bytes.NewReader(tc.input), storage.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := members.Of(st).Member(t.Context(), "keeper"); err != nil {
		t.Fatalf("the store lost its data to a refused restore: %v", err)
	}
	if _, err := members.Of(st).Member(t.Context(), "member0"); err == nil {
		t.Fatal("a refused restore loaded records")
	}
}

// Replace brings a running store to a backup's records: what the backup
// lacks is gone, what it has is back (cached records included, expiry
// kept), the earlier records are in a backup file that restores them, and
// input that is not a complete backup changes nothing.
func TestReplaceBringsARunningStoreToABackup(t *testing.T) {
	st := storagetest.Open(t)
	alice, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := members.Of(st).CreateSession(t.Context(), alice.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b := storagetest.Backup(t, st)
	if _, err := members.Of(st).CreateMember(t.Context(), "bob", "", "battery staple"); err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(st).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(st).SessionMember(t.Context(), sid); err == nil {
		t.Fatal("a suspended member's session still works")
	}

	if _, err := st.Replace(strings.NewReader("not a backup")); !errors.Is(err, storage.ErrNotBackup) {
		t.Fatalf("Replace with a text: %v", err)
	}
	// One restore at a time: a second while the first reads its input is
	// refused (two loading into one scratch directory crashed Badger).
	pr, pw := io.Pipe()
	first := make(chan error, 1)
	go func() { _, err := st.Replace(pr); first <- err }()
	if _, err := pw.Write(b[:8]); err != nil { // returns once the first is reading
		t.Fatal(err)
	}
	if _, err := st.Replace(bytes.NewReader(b)); !errors.Is(err, storage.ErrRestoreRunning) {
		t.Fatalf("a second Replace during the first: %v, want ErrRestoreRunning", err)
	}
	pw.CloseWithError(errors.New("client gone"))
	if err := <-first; err == nil {
		t.Fatal("a Replace whose input broke off succeeded")
	}
	if _, err := members.Of(st).Member(t.Context(), "bob"); err != nil {
		t.Fatalf("a refused Replace changed the store: %v", err)
	}

	previous, err := st.Replace(bytes.NewReader(b))
	if err != nil || previous == "" {
		t.Fatalf("Replace = %q, %v", previous, err)
	}
	if _, err := members.Of(st).Member(t.Context(), "bob"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("bob, created after the backup: %v", err)
	}
	if m, err := members.Of(st).Member(t.Context(), "alice"); err != nil || m.Suspended {
		t.Fatalf("alice after Replace: %+v, %v", m, err)
	}
	if m, err := members.Of(st).SessionMember(t.Context(), sid); err != nil || m.ID != alice.ID {
		t.Fatalf("alice's session after Replace: %v, %v", m, err)
	}
	if exp, ok := recordExpiry(t, st, storage.Key("session", storage.Digest(sid))); !ok || exp == 0 {
		t.Fatalf("the restored session: present %v, expires at %d; want an expiry", ok, exp)
	}

	f, err := os.Open(previous)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := st.Replace(f); err != nil {
		t.Fatalf("Replace with the earlier records: %v", err)
	}
	if _, err := members.Of(st).Member(t.Context(), "bob"); err != nil {
		t.Fatalf("the earlier records did not bring bob back: %v", err)
	}
}

// dumpRecords returns every record of st (key → value and expiry), to
// compare a store with itself before and after.
func dumpRecords(t *testing.T, st *storage.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.ExportRecords(context.Background(), func(r kv.Record) error {
		out[string(r.Key)] = fmt.Sprintf("%x/%d", r.Value, r.ExpiresAt)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A backup whose length is intact but whose bytes were changed anywhere
// (header, a length, a record, the end record, the checksum) is refused
// with ErrNotBackup and the running store keeps exactly its records. Before
// the checksum, most such files were loaded without complaint.
func TestReplaceRefusesDamagedBackupsAndChangesNothing(t *testing.T) {
	src := storagetest.Open(t)
	for i := range 30 {
		m, err := members.Of(src).CreateMember(t.Context(), fmt.Sprint("member", i), strings.Repeat("d", 20), "correct horse")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := members.Of(src).CreateSession(t.Context(), m.ID, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	b := storagetest.Backup(t, src)

	live := storagetest.Open(t)
	if _, err := members.Of(live).CreateMember(t.Context(), "keeper", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	before := dumpRecords(t, live)
	offsets := []int{0, 5, len(storage.BackupMagic) - 1, len(storage.BackupMagic), len(storage.BackupMagic) + 7, len(b) - 1, len(b) - storage.BackupChecksumLen, len(b) - storage.BackupChecksumLen - 1, len(b) - storage.BackupChecksumLen - 9}
	for off := len(storage.BackupMagic) + 8; off < len(b)-storage.BackupChecksumLen; off += max(1, len(b)/150) {
		offsets = append(offsets, off)
	}
	for _, off := range offsets {
		for _, flip := range []byte{0x01, 0xff} {
			damaged := append([]byte(nil), b...)
			damaged[off] ^= flip
			prev, err := live.Replace(bytes.NewReader(damaged))
			if !errors.Is(err, storage.ErrNotBackup) || prev != "" {
				t.Fatalf("byte %d of %d ^%#x: Replace = %q, %v; want ErrNotBackup", off, len(b), flip, prev, err)
			}
		}
	}
	// Sixteen bytes at once, as an unlucky disk does.
	for off := len(storage.BackupMagic); off+16 < len(b); off += len(b) / 12 {
		damaged := append([]byte(nil), b...)
		for i := range 16 {
			damaged[off+i] ^= 0x5a
		}
		if _, err := live.Replace(bytes.NewReader(damaged)); !errors.Is(err, storage.ErrNotBackup) {
			t.Fatalf("16 bytes at %d: %v; want ErrNotBackup", off, err)
		}
	}
	// Foreign files of about the same size.
	for name, foreign := range map[string][]byte{
		"zeros":   make([]byte, len(b)),
		"ones":    bytes.Repeat([]byte{0xff}, len(b)),
		"gzip":    append([]byte{0x1f, 0x8b, 8, 0}, make([]byte, len(b))...),
		"json":    []byte(strings.Repeat(`{"key":"value"}`, len(b)/15)),
		"reverse": func() []byte { r := append([]byte(nil), b...); slices.Reverse(r); return r }(),
	} {
		if _, err := live.Replace(bytes.NewReader(foreign)); !errors.Is(err, storage.ErrNotBackup) {
			t.Fatalf("%s: %v; want ErrNotBackup", name, err)
		}
	}
	if after := dumpRecords(t, live); !maps.Equal(before, after) {
		t.Fatal("a refused restore changed the store")
	}
	if _, err := members.Of(live).Member(t.Context(), "keeper"); err != nil {
		t.Fatal(err)
	}
	// The intact file restores.
	if _, err := live.Replace(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(dumpRecords(t, src), dumpRecords(t, live)) {
		t.Fatal("the restored store does not hold the backup's records")
	}
}

// Backups written by earlier versions still restore, into a stopped store's
// directory (RestoreDir) and into a running one (Replace): testdata holds a
// backup of format 2 (Badger's backup frames with Hearth's header, end
// record and checksum), written by the version before format 3, and the
// same without the header and checksum (format 1, the first version's);
// on either engine.
// Their store: alice (display name Alice, password "correct horse") with a
// session for a hundred years, bob suspended, and gone, deleted.
func TestBackupsOfEarlierFormatsRestore(t *testing.T) {
	const aliceID, session = "117689247035490304", "hs_sh0m3QWaN6BE9NBl9dCayQjfy9y-iG9_4h-ehTHFRrY"
	for _, format := range []string{"format1", "format2"} {
		b, err := os.ReadFile(filepath.Join("testdata", format+".backup"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(format, func(t *testing.T) {
			live := storagetest.Open(t)
			if _, err := members.Of(live).CreateMember(t.Context(), "mallory", "", "correct horse"); err != nil {
				t.Fatal(err)
			}
			if _, err := live.Replace(bytes.NewReader(b)); err != nil {
				t.Fatalf("Replace: %v", err)
			}
			checkRestoredMembers(t, live, aliceID, session)
			if _, err := members.Of(live).Member(t.Context(), "mallory"); err == nil {
				t.Fatal("Replace kept a record the backup lacks")
			}
			if storagetest.OnPostgres() {
				return // RestoreDir: a Badger directory
			}
			dir := filepath.Join(t.TempDir(), "store")
			if _, err := storage.RestoreDir(dir, bytes.NewReader(b), storage.Options{}); err != nil {
				t.Fatalf("RestoreDir: %v", err)
			}
			st, err := storage.Open(dir, storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			checkRestoredMembers(t, st, aliceID, session)
		})
	}
}

// A restore that fails while writing the records leaves the store exactly
// as it was (the failure is injected after some records were written).
func TestReplaceThatFailsPartWayLeavesTheStoreAsItWas(t *testing.T) {
	src := storagetest.Open(t)
	for i := range 50 {
		if _, err := members.Of(src).CreateMember(t.Context(), fmt.Sprint("new", i), "", "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	full := storagetest.Backup(t, src)
	for _, withRecords := range []bool{true, false} {
		live := storagetest.Open(t)
		if withRecords {
			for i := range 20 {
				m, err := members.Of(live).CreateMember(t.Context(), fmt.Sprint("old", i), "", "correct horse")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := members.Of(live).CreateSession(t.Context(), m.ID, 24*time.Hour); err != nil {
					t.Fatal(err)
				}
			}
		}
		before := dumpRecords(t, live)
		injected := errors.New("injected: disk error")
		failed := false
		live.SetRestoreHook(func(n int) error {
			if n == 30 && !failed { // the restore fails; the roll-back does not
				failed = true
				return injected
			}
			return nil
		})
		_, err := live.Replace(bytes.NewReader(full))
		live.SetRestoreHook(nil)
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), "holds its earlier records again") {
			t.Fatalf("Replace with a failure part-way: %v", err)
		}
		if after := dumpRecords(t, live); !maps.Equal(before, after) {
			t.Fatalf("with records %v: the store changed (%d records before, %d after)", withRecords, len(before), len(after))
		}
		// Writes work again.
		if _, err := members.Of(live).CreateMember(t.Context(), "later", "", "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
}

// Writes during a live restore are refused with ErrRestoring, never
// acknowledged and then overwritten: every write acknowledged while
// Replace ran is in the records it saved as previous (the store's state
// the restore replaced), or in the store afterwards. Reads go on.
func TestWritesDuringARestoreAreRefusedNotLost(t *testing.T) {
	src := storagetest.Open(t)
	for i := range 300 {
		if _, err := members.Of(src).CreateMember(t.Context(), fmt.Sprint("restored", i), strings.Repeat("d", 25), "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	full := storagetest.Backup(t, src)
	live := storagetest.Open(t)
	if _, err := members.Of(live).CreateMember(t.Context(), "reader", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	var refusedInside, readInside error
	live.SetRestoreHook(func(n int) error {
		if n == 1 {
			_, refusedInside = members.Of(live).CreateMember(t.Context(), "inside", "", "correct horse")
			_, readInside = members.Of(live).Member(t.Context(), "reader")
		}
		return nil
	})
	defer live.SetRestoreHook(nil)

	stop := make(chan struct{})
	type result struct {
		acked   []string
		refused int
		err     error
	}
	done := make(chan result)
	go func() {
		var r result
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- r
				return
			default:
			}
			name := fmt.Sprint("writer", i)
			_, err := members.Of(live).CreateMember(t.Context(), name, "", "correct horse")
			switch {
			case err == nil:
				r.acked = append(r.acked, name)
			case errors.Is(err, storage.ErrRestoring):
				r.refused++
			default:
				r.err = err
				done <- r
				return
			}
		}
	}()
	// The writer is running before the restore starts.
	for {
		if _, err := members.Of(live).Member(t.Context(), "writer0"); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	previous, err := live.Replace(bytes.NewReader(full))
	close(stop)
	r := <-done
	if err != nil || r.err != nil {
		t.Fatalf("Replace: %v; writer: %v", err, r.err)
	}
	if !errors.Is(refusedInside, storage.ErrRestoring) {
		t.Fatalf("a write during the restore: %v, want ErrRestoring", refusedInside)
	}
	if readInside != nil && !errors.Is(readInside, storage.ErrNotFound) { // the record may be gone already
		t.Fatalf("a read during the restore: %v", readInside)
	}
	f, err := os.Open(previous)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prevStore := storagetest.Open(t)
	if _, err := prevStore.Replace(f); err != nil {
		t.Fatal(err)
	}
	for _, name := range r.acked {
		_, inPrev := members.Of(prevStore).Member(t.Context(), name)
		_, inLive := members.Of(live).Member(t.Context(), name)
		if inPrev != nil && inLive != nil {
			t.Fatalf("%s was acknowledged during the restore and is lost (%d acknowledged, %d refused)", name, len(r.acked), r.refused)
		}
	}
	t.Logf("%d writes acknowledged, %d refused with ErrRestoring", len(r.acked), r.refused)
}

// recordExpiry returns the expiry (Unix seconds, 0 for none) of the record
// at key, and whether it is there.
func recordExpiry(t *testing.T, st *storage.Store, key []byte) (uint64, bool) {
	t.Helper()
	var exp uint64
	found := false
	if err := st.ExportRecords(context.Background(), func(r kv.Record) error {
		if bytes.Equal(r.Key, key) {
			exp, found = r.ExpiresAt, true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return exp, found
}
