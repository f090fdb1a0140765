package members

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

func openTestStore(t testing.TB) Store {
	t.Helper()
	return Of(storagetest.Open(t))
}

func TestCreateMemberValidation(t *testing.T) {
	st := openTestStore(t)
	cases := []struct {
		name, username, display, password string
	}{
		{"empty username", "", "", "correct horse"},
		{"username too long", strings.Repeat("a", 31), "", "correct horse"},
		{"username with dash", "al-ice", "", "correct horse"},
		{"username with dot", "al.ice", "", "correct horse"},
		{"username with space", "al ice", "", "correct horse"},
		{"username non-ascii", "alicé", "", "correct horse"},
		{"password too short", "alice", "", "short"},
		{"password too long", "alice", "", strings.Repeat("p", 129)},
		{"display name too long", "alice", strings.Repeat("d", 31), "correct horse"},
		{"display name with newline", "alice", "a\nb", "correct horse"},
		{"display name invalid utf8", "alice", "\xff", "correct horse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := st.CreateMember(t.Context(), c.username, c.display, c.password)
			if !storage.IsInvalid(err) {
				t.Fatalf("CreateMember: got %v, want an InvalidError", err)
			}
		})
	}
	ms, err := st.Members(t.Context())
	if err != nil || len(ms) != 0 {
		t.Fatalf("members after invalid creates: %v, %v", ms, err)
	}
	for _, ok := range []string{"a", "A_1", strings.Repeat("z", 30)} {
		if _, err := st.CreateMember(t.Context(), ok, "", "correct horse"); err != nil {
			t.Errorf("CreateMember(%q): %v", ok, err)
		}
	}
}

func TestMemberUsernameUniqueCaseInsensitive(t *testing.T) {
	st := openTestStore(t)
	m, err := st.CreateMember(t.Context(), "Alice", "Alice A.", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if m.PasswordHash == "" || strings.Contains(m.PasswordHash, "correct horse") {
		t.Fatalf("password not hashed: %q", m.PasswordHash)
	}
	for _, name := range []string{"Alice", "alice", "ALICE"} {
		if _, err := st.CreateMember(t.Context(), name, "", "other password"); !errors.Is(err, storage.ErrConflict) {
			t.Errorf("CreateMember(%q): got %v, want storage.ErrConflict", name, err)
		}
	}
	got, err := st.Member(t.Context(), "aLiCe")
	if err != nil || got.ID != m.ID || got.Username != "Alice" || got.DisplayName != "Alice A." {
		t.Fatalf("Member(aLiCe) = %+v, %v", got, err)
	}
	if _, err := st.Member(t.Context(), "bob"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Member(bob): %v", err)
	}
	if _, err := st.Member(t.Context(), "../etc"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Member(bad name): %v", err)
	}
}

func TestConcurrentCreateSameUsernameOnlyOneWins(t *testing.T) {
	st := openTestStore(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		name := []string{"carol", "Carol", "CAROL", "cArOl"}[i%4]
		go func() {
			defer wg.Done()
			if _, err := st.CreateMember(t.Context(), name, "", "correct horse"); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, storage.ErrConflict) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ms, _ := st.Members(t.Context())
	if wins != 1 || len(ms) != 1 {
		t.Fatalf("wins=%d members=%d, want 1 and 1", wins, len(ms))
	}
}

func TestMembersListedByUsername(t *testing.T) {
	st := openTestStore(t)
	for _, n := range []string{"zed", "Bob", "alice"} {
		if _, err := st.CreateMember(t.Context(), n, "", "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := st.Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Username)
	}
	if strings.Join(names, ",") != "alice,Bob,zed" {
		t.Fatalf("order: %v", names)
	}
}

func TestAuthenticate(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.CreateMember(t.Context(), "alice", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Authenticate(t.Context(), "ALICE", "correct horse"); err != nil || m.Username != "alice" {
		t.Fatalf("right password: %v, %v", m, err)
	}
	if _, err := st.Authenticate(t.Context(), "alice", "wrong horse"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := st.Authenticate(t.Context(), "nobody", "correct horse"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown member: %v", err)
	}
	if err := st.SetPassword(t.Context(), "alice", "new password!"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate(t.Context(), "alice", "correct horse"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("old password after change: %v", err)
	}
	if _, err := st.Authenticate(t.Context(), "alice", "new password!"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if err := st.SetPassword(t.Context(), "alice", "short"); !storage.IsInvalid(err) {
		t.Fatalf("short password: %v", err)
	}
	if err := st.SetPassword(t.Context(), "nobody", "long enough"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown member: %v", err)
	}
}

func TestArgon2idHash(t *testing.T) {
	h := hashPassword("correct horse", argonServed)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash format: %s", h)
	}
	if !strings.HasPrefix(HashPassword("correct horse"), "$argon2id$v=19$m=8,t=1,p=1$") {
		t.Fatalf("a test binary's hash format: %s", HashPassword("correct horse"))
	}
	if h == hashPassword("correct horse", argonServed) {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	if !CheckPassword(h, "correct horse") || CheckPassword(h, "correct horsE") || CheckPassword(h, "") {
		t.Fatal("CheckPassword mismatch")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$AAAA$AAAA", "$argon2id$v=19$m=19456,t=0,p=1$AAAA$AAAA",
		"$argon2id$v=19$m=19456,t=2,p=0$AAAA$AAAA", "$argon2id$v=19$m=19456,t=2,p=1$!!$AAAA", strings.Replace(h, "t=2", "t=x", 1)} {
		if CheckPassword(bad, "correct horse") {
			t.Errorf("CheckPassword accepted %q", bad)
		}
	}
}

func TestSuspensionEndsSessionsAndBlocksSignIn(t *testing.T) {
	st := openTestStore(t)
	m, err := st.CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := st.CreateSession(t.Context(), m.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.SessionMember(t.Context(), sid); err != nil || got.ID != m.ID {
		t.Fatalf("session before suspension: %v, %v", got, err)
	}
	if _, err := st.SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionMember(t.Context(), sid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("session after suspension: %v, want storage.ErrNotFound", err)
	}
	if _, err := st.Authenticate(t.Context(), "alice", "correct horse"); !errors.Is(err, ErrSuspended) {
		t.Fatalf("sign-in while suspended: %v", err)
	}
	if _, err := st.Authenticate(t.Context(), "alice", "wrong horse"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password while suspended must not reveal suspension: %v", err)
	}
	if _, err := st.SetSuspended(t.Context(), "alice", false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate(t.Context(), "alice", "correct horse"); err != nil {
		t.Fatalf("sign-in after unsuspend: %v", err)
	}
	if _, err := st.SetSuspended(t.Context(), "nobody", true); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("suspend unknown: %v", err)
	}
}

func TestSessions(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	sid, err := st.CreateSession(t.Context(), m.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sid, SessionPrefix) || len(sid) < 40 {
		t.Fatalf("session id %q", sid)
	}
	// The store keeps only the digest: the raw id is nowhere in the database.
	var dump bytes.Buffer
	if err := st.st.Backup(&dump); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(dump.Bytes(), []byte(sid)) || bytes.Contains(dump.Bytes(), []byte(sid[len(SessionPrefix):])) {
		t.Fatal("raw session id stored")
	}
	for _, bad := range []string{"", "hs_", sid + "x", sid[:len(sid)-1], strings.Repeat("a", 200)} {
		if _, err := st.SessionMember(t.Context(), bad); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("SessionMember(%q): %v", bad, err)
		}
	}
	if err := st.DeleteSession(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionMember(t.Context(), sid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after sign-out: %v", err)
	}
	if err := st.DeleteSession(t.Context(), "hs_unknown"); err != nil {
		t.Fatalf("deleting an unknown session: %v", err)
	}
	if _, err := st.CreateSession(t.Context(), "12345", time.Hour); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("session for unknown member: %v", err)
	}
}

func TestSessionExpires(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	short, err := st.CreateSession(t.Context(), m.ID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	long, _ := st.CreateSession(t.Context(), m.ID, time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := st.SessionMember(t.Context(), short)
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a one-second session still works after 10s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := st.SessionMember(t.Context(), long); err != nil {
		t.Fatalf("the one-hour session ended too: %v", err)
	}
}

func TestPasswordChangeEndsSessions(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	sid, _ := st.CreateSession(t.Context(), m.ID, time.Hour)
	if err := st.SetPassword(t.Context(), "alice", "another password"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionMember(t.Context(), sid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("session after password change: %v", err)
	}
}

func TestDeleteMemberRemovesItsRecords(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	other, _ := st.CreateMember(t.Context(), "bob", "", "correct horse")
	sid, _ := st.CreateSession(t.Context(), m.ID, time.Hour)
	// Owned records, more than one delete batch.
	err := st.st.Update(t.Context(), func(tx *storage.Tx) error {
		for i := 0; i < 2500; i++ {
			if err := tx.Put(storage.Key("u", m.ID, "x", strconv.Itoa(i)), []byte("v"), 0); err != nil {
				return err
			}
		}
		return tx.Put(storage.Key("u", other.ID, "x", "1"), []byte("v"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMember(t.Context(), "ALICE"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("member after delete: %v", err)
	}
	if _, err := st.SessionMember(t.Context(), sid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("session after delete: %v", err)
	}
	countPrefix := func(p []byte) (n int) {
		st.st.View(t.Context(), func(tx *storage.Tx) error {
			return tx.Scan(p, nil, false, true, func(_, _ []byte) (bool, error) { n++; return true, nil })
		})
		return n
	}
	if n := countPrefix(memberDataPrefix(m.ID)); n != 0 {
		t.Fatalf("%d owned records left", n)
	}
	if n := countPrefix(memberDataPrefix(other.ID)); n != 1 {
		t.Fatalf("other member's records: %d, want 1", n)
	}
	if _, err := st.CreateMember(t.Context(), "Alice", "", "correct horse"); err != nil {
		t.Fatalf("username reusable after delete: %v", err)
	}
	if err := st.DeleteMember(t.Context(), "nobody"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}

// One-line names shown on pages refuse control characters: a member's
// display name (an API token's name: storage/apitokens).
func TestNamesRefuseControlCharacters(t *testing.T) {
	st := openTestStore(t)
	if _, err := st.CreateMember(t.Context(), "alice", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a\x00b", "tab\there", "esc\x1b[31m", "line\nbreak"} {
		if _, err := st.CreateMember(t.Context(), "bob", name, "correct horse"); !storage.IsInvalid(err) {
			t.Errorf("display name %q: %v, want invalid", name, err)
		}
	}
	if ms, err := st.Members(t.Context()); err != nil || len(ms) != 1 {
		t.Fatalf("members: %d, %v; refused names must create nothing", len(ms), err)
	}
}

// The members' tests run on Badger, and with HEARTH_TEST_ENGINE=postgres
// on PostgreSQL (storagetest.Main: a server on 127.0.0.1:testPostgresPort).
const testPostgresPort = 15447

func TestMain(m *testing.M) { storagetest.Main(m, testPostgresPort) }
