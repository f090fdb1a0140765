package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
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
		"miscounted end":           append(append([]byte(nil), b[:firstFrame]...), b[len(b)-endLen:]...),
		"backup of an empty store": emptyBackup.Bytes(),
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
