package apitokens

import (
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// TestSessionTokenAfterACredentialChange: a session's request to make an
// API token that read the member before its password changed (or
// two-factor sign-in was turned on) makes none, whether the change
// committed before the token's transaction started or inside it: the
// change ended that session.
func TestSessionTokenAfterACredentialChange(t *testing.T) {
	store, il := storagetest.OpenInterleaved(t)
	ms := members.Of(store)
	m, err := ms.CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	change := func(i int) func() {
		return func() {
			if _, _, err := ms.ChangePassword(t.Context(), m.ID, "new password "+string(rune('a'+i)), "", false); err != nil {
				t.Error(err)
			}
		}
	}
	read := func() *members.Member {
		r, err := ms.MemberByID(t.Context(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The change before the token's transaction.
	session := read()
	change(0)()
	if _, _, err := Of(store).CreateFromSession(t.Context(), session, "script", 0); !errors.Is(err, members.ErrCredentialsChanged) {
		t.Fatalf("a token after the change: %v, want ErrCredentialsChanged", err)
	}
	// The change committed inside the token's transaction.
	session = read()
	il.BeforeCommit(apiTokenKey(m.ID, ""), change(1))
	if _, _, err := Of(store).CreateFromSession(t.Context(), session, "script", 0); !errors.Is(err, members.ErrCredentialsChanged) {
		t.Fatalf("a token around the change: %v, want ErrCredentialsChanged", err)
	}
	if list, err := Of(store).List(t.Context(), m.ID); err != nil || len(list) != 0 {
		t.Fatalf("tokens after the refused requests: %d %v", len(list), err)
	}
	// A session read after the change makes one.
	if _, _, err := Of(store).CreateFromSession(t.Context(), read(), "script", time.Hour); err != nil {
		t.Fatal(err)
	}
}
