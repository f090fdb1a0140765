package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Input that is not a complete backup is refused with ErrNotBackup, without
// a panic, and the store it was to replace keeps its data: an empty file, a
// text file, a backup cut short at any point (inside a record, between
// records, inside the end record), with bytes after the end, or the backup
// of an empty store.
func TestRestoreRefusesWhatIsNotACompleteBackup(t *testing.T) {
	src := openTestStore(t)
	for i := range 20 {
		if _, err := src.CreateMember(fmt.Sprint("member", i), strings.Repeat("d", 20), "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	var full bytes.Buffer
	if err := src.Backup(&full); err != nil {
		t.Fatal(err)
	}
	b := full.Bytes()
	endLen := 8 + len(backupEndMagic) + 8
	firstFrame := 8 + int(binary.LittleEndian.Uint64(b))
	miscounted := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(miscounted[len(b)-8:], binary.LittleEndian.Uint64(b[len(b)-8:])+1)
	oneEmptyFrame := binary.LittleEndian.AppendUint64(nil, 0)
	oneEmptyFrame = binary.LittleEndian.AppendUint64(oneEmptyFrame, backupEndMarker)
	oneEmptyFrame = append(oneEmptyFrame, backupEndMagic...)
	oneEmptyFrame = binary.LittleEndian.AppendUint64(oneEmptyFrame, 8)
	var emptyBackup bytes.Buffer
	if err := openTestStore(t).Backup(&emptyBackup); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "store")
	live, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.CreateMember("keeper", "", "correct horse"); err != nil {
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
		"cut inside the end":       b[:len(b)-5],
		"bytes after the end":      append(append([]byte(nil), b...), 0),
		"miscounted end":           miscounted,
		"backup of an empty store": emptyBackup.Bytes(),
		"one empty frame":          oneEmptyFrame,
	} {
		prev, err := RestoreDir(dir, bytes.NewReader(input), Options{})
		if !errors.Is(err, ErrNotBackup) || prev != "" {
			t.Errorf("%s: RestoreDir = %q, %v; want ErrNotBackup", name, prev, err)
		}
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Member("keeper"); err != nil {
		t.Fatalf("the store lost its data to a refused restore: %v", err)
	}
	if _, err := st.Member("member0"); err == nil {
		t.Fatal("a refused restore loaded records")
	}
}

// Replace brings a running store to a backup's records: what the backup
// lacks is gone, what it has is back (cached records included, expiry
// kept), the earlier records are in a backup file that restores them, and
// input that is not a complete backup changes nothing.
func TestReplaceBringsARunningStoreToABackup(t *testing.T) {
	st := openTestStore(t)
	alice, err := st.CreateMember("alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := st.CreateSession(alice.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := st.Backup(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateMember("bob", "", "battery staple"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSuspended("alice", true); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionMember(sid); err == nil {
		t.Fatal("a suspended member's session still works")
	}

	if _, err := st.Replace(strings.NewReader("not a backup")); !errors.Is(err, ErrNotBackup) {
		t.Fatalf("Replace with a text: %v", err)
	}
	// One restore at a time: a second while the first reads its input is
	// refused (two loading into one scratch directory crashed Badger).
	pr, pw := io.Pipe()
	first := make(chan error, 1)
	go func() { _, err := st.Replace(pr); first <- err }()
	if _, err := pw.Write(b.Bytes()[:8]); err != nil { // returns once the first is reading
		t.Fatal(err)
	}
	if _, err := st.Replace(bytes.NewReader(b.Bytes())); !errors.Is(err, ErrRestoreRunning) {
		t.Fatalf("a second Replace during the first: %v, want ErrRestoreRunning", err)
	}
	pw.CloseWithError(errors.New("client gone"))
	if err := <-first; err == nil {
		t.Fatal("a Replace whose input broke off succeeded")
	}
	if _, err := st.Member("bob"); err != nil {
		t.Fatalf("a refused Replace changed the store: %v", err)
	}

	previous, err := st.Replace(bytes.NewReader(b.Bytes()))
	if err != nil || previous == "" {
		t.Fatalf("Replace = %q, %v", previous, err)
	}
	if _, err := st.Member("bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob, created after the backup: %v", err)
	}
	if m, err := st.Member("alice"); err != nil || m.Suspended {
		t.Fatalf("alice after Replace: %+v, %v", m, err)
	}
	if m, err := st.SessionMember(sid); err != nil || m.ID != alice.ID {
		t.Fatalf("alice's session after Replace: %v, %v", m, err)
	}
	err = st.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(sessionKey(Digest(sid)))
		if err == nil && item.ExpiresAt() == 0 {
			err = errors.New("the restored session lost its expiry")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(previous)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := st.Replace(f); err != nil {
		t.Fatalf("Replace with the earlier records: %v", err)
	}
	if _, err := st.Member("bob"); err != nil {
		t.Fatalf("the earlier records did not bring bob back: %v", err)
	}
}
