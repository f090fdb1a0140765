package storage_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/internal/testchild"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

func TestOpenTwiceIsRefusedUntilClosed(t *testing.T) {
	storage.BadgerOnly(t)
	dir := t.TempDir()
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Open(dir, storage.Options{}); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	st2, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	st2.Close()
}

func TestBackupRestoreRoundTrip(t *testing.T) {
	storage.BadgerOnly(t) // RestoreDir: a Badger directory
	src := storagetest.Open(t)
	alice, err := members.Of(src).CreateMember(t.Context(), "alice", "Alice", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(src).CreateMember(t.Context(), "bob", "", "battery staple"); err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(src).SetSuspended(t.Context(), "bob", true); err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(src).CreateMember(t.Context(), "gone", "", "battery staple"); err != nil {
		t.Fatal(err)
	}
	if err := members.Of(src).DeleteMember(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	sid, _ := members.Of(src).CreateSession(t.Context(), alice.ID, time.Hour)
	buf := storagetest.Backup(t, src)

	// Restore into a directory that holds other data: it moves aside.
	dir := filepath.Join(t.TempDir(), "store")
	other, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(other).CreateMember(t.Context(), "mallory", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	// While the directory is open, restore refuses.
	if _, err := storage.RestoreDir(dir, bytes.NewReader(buf), storage.Options{}); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("restore into an open store: got %v, want ErrLocked", err)
	}
	other.Close()
	// A damaged backup leaves the directory as it was.
	if _, err := storage.RestoreDir(dir, bytes.NewReader(buf[:len(buf)/2]), storage.Options{}); err == nil {
		t.Fatal("restore of a truncated backup succeeded")
	}
	prev, err := storage.RestoreDir(dir, bytes.NewReader(buf), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if prev == "" {
		t.Fatal("previous data not kept")
	}

	dst, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	checkRestoredMembers(t, dst, alice.ID, sid)

	old, err := storage.Open(prev, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := members.Of(old).Member(t.Context(), "mallory"); err != nil {
		t.Fatalf("previous data lost: %v", err)
	}
}

func TestRestoreIntoMissingDirectory(t *testing.T) {
	storage.BadgerOnly(t)
	src := storagetest.Open(t)
	members.Of(src).CreateMember(t.Context(), "alice", "", "correct horse")
	buf := storagetest.Backup(t, src)
	dir := filepath.Join(t.TempDir(), "new")
	prev, err := storage.RestoreDir(dir, bytes.NewReader(buf), storage.Options{})
	if err != nil || prev != "" {
		t.Fatalf("RestoreDir = %q, %v", prev, err)
	}
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := members.Of(st).Member(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
}

// durabilityChildEnv makes the test binary act as the writer process of
// TestAcknowledgedWritesSurviveSIGKILL.
const durabilityChildEnv = "HEARTH_DURABILITY_CHILD_DIR"

func durabilityKey(i int) []byte { return storage.Key("test", "durability", strconv.Itoa(i)) }

// durabilityChild writes records one by one and prints "ack <n>" after each
// commit returned, as a server answers its client, until it is killed.
func durabilityChild(dir string) {
	opts := storage.Options{}
	mode := os.Getenv(durabilitySyncEnv)
	if mode == "off" {
		off := false
		opts.SyncWrites = &off
	}
	st, err := storage.Open(dir, opts)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	update := st.Update
	if mode == "async" {
		update = st.UpdateAsync
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		err := update(context.Background(), func(tx *storage.Tx) error { return tx.Put(durabilityKey(i), []byte(strconv.Itoa(i)), 0) })
		if err != nil {
			fmt.Fprintln(w, "error", err)
			w.Flush()
			os.Exit(1)
		}
		fmt.Fprintf(w, "ack %d\n", i)
		w.Flush()
	}
}

// durabilitySyncEnv set to "off" makes the child open the store with
// sync_writes off: Badger's logs are memory-mapped files, so what a commit
// wrote survives the death of the process even without fsync (only a power
// loss needs it). Set to "async", the child keeps sync_writes on and commits
// with UpdateAsync, which returns before the sync.
const durabilitySyncEnv = "HEARTH_DURABILITY_SYNC"

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	storage.BadgerOnly(t)
	if dir := os.Getenv(durabilityChildEnv); dir != "" {
		durabilityChild(dir)
		return
	}
	for _, sync := range []string{"on", "off", "async"} {
		t.Run("sync_writes "+sync, func(t *testing.T) { testSurvivesSIGKILL(t, sync) })
	}
}

func testSurvivesSIGKILL(t *testing.T, sync string) {
	dir := t.TempDir()
	child := testchild.Start(t, "TestAcknowledgedWritesSurviveSIGKILL", durabilityChildEnv+"="+dir, durabilitySyncEnv+"="+sync)
	acked := -1
	for child.Lines.Scan() {
		line := child.Lines.Text()
		if n, ok := strings.CutPrefix(line, "ack "); ok {
			acked, _ = strconv.Atoi(n)
			if acked == 300 {
				// Kill it mid-stream: it is writing the next record now.
				child.Kill(t)
			}
			continue
		}
		child.Process.Kill()
		t.Fatalf("child: %s", line)
	}
	child.WaitKilled(t)
	if acked < 300 {
		t.Fatalf("child acknowledged only %d records", acked+1)
	}

	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer st.Close()
	err = st.View(t.Context(), func(tx *storage.Tx) error {
		for i := 0; i <= acked; i++ {
			v, err := tx.Get(durabilityKey(i))
			if err != nil || string(v) != strconv.Itoa(i) {
				return fmt.Errorf("acknowledged record %d (of %d) lost: %q, %v", i, acked+1, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d acknowledged records present after SIGKILL", acked+1)
}

// checkRestoredMembers fails unless st holds the members of a restored
// backup: alice (display name Alice, password "correct horse") with the
// session sid, bob suspended, and the unique index of usernames.
func checkRestoredMembers(t *testing.T, st *storage.Store, aliceID, sid string) {
	t.Helper()
	ms, err := members.Of(st).Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, fmt.Sprintf("%s/%v", m.Username, m.Suspended))
	}
	if strings.Join(names, ",") != "alice/false,bob/true" {
		t.Fatalf("restored members: %v", names)
	}
	if m, err := members.Of(st).Authenticate(t.Context(), "alice", "correct horse"); err != nil || m.ID != aliceID || m.DisplayName != "Alice" {
		t.Fatalf("restored alice: %+v, %v", m, err)
	}
	if m, err := members.Of(st).SessionMember(t.Context(), sid); err != nil || m.ID != aliceID {
		t.Fatalf("restored session: %+v, %v", m, err)
	}
	if _, err := members.Of(st).CreateMember(t.Context(), "ALICE", "", "correct horse"); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("unique index not restored: %v", err)
	}
}
