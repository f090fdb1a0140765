package members

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A change of credentials, with what must be in place before the sign-in
// that races it starts.
type credentialChange struct {
	name   string
	before func(t *testing.T, st Store, m *Member) // optional
	change func(ctx context.Context, st Store, m *Member) error
}

var credentialChanges = []credentialChange{
	{name: "password changed on the account page", change: func(ctx context.Context, st Store, m *Member) error {
		_, _, err := st.ChangePassword(ctx, m.ID, "a new password", "", false)
		return err
	}},
	{name: "password set by the operator", change: func(ctx context.Context, st Store, m *Member) error {
		return st.SetPassword(ctx, m.Username, "a new password")
	}},
	{name: "two-factor sign-in turned on", before: func(t *testing.T, st Store, m *Member) {
		if err := st.StartTwoFactorSetup(t.Context(), m.ID, testSecret); err != nil {
			t.Fatal(err)
		}
	}, change: func(ctx context.Context, st Store, m *Member) error {
		code, _ := TOTPCode(testSecret, time.Now())
		_, err := st.ConfirmTwoFactor(ctx, m.ID, code, "")
		return err
	}},
	{name: "two-factor sign-in turned off", before: func(t *testing.T, st Store, m *Member) {
		withTwoFactor(t, st, m, time.Now())
	}, change: func(ctx context.Context, st Store, m *Member) error {
		return st.DisableTwoFactor(ctx, m.ID, "")
	}},
	{name: "passkey added", change: func(ctx context.Context, st Store, m *Member) error {
		cur, err := st.MemberByID(ctx, m.ID)
		if err != nil {
			return err
		}
		_, err = st.AddPasskey(ctx, cur, "Phone", webauthn.Credential{ID: []byte("credential " + m.ID)}, "")
		return err
	}},
	{name: "passkey removed", before: func(t *testing.T, st Store, m *Member) {
		cur, err := st.MemberByID(t.Context(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddPasskey(t.Context(), cur, "Phone", webauthn.Credential{ID: []byte("credential " + m.ID)}, ""); err != nil {
			t.Fatal(err)
		}
	}, change: func(ctx context.Context, st Store, m *Member) error {
		return st.RemovePasskey(ctx, m.ID, PasskeyID([]byte("credential "+m.ID)), "")
	}},
	resetLinkChange("reset link used", ResetLinkOptions{}),
	resetLinkChange("reset link ending access used", ResetLinkOptions{RevokeAccess: true}),
	resetLinkChange("reset link turning two-factor off used", ResetLinkOptions{DisableTwoFactor: true}),
	{name: "member suspended", change: func(ctx context.Context, st Store, m *Member) error {
		_, err := st.SetSuspended(ctx, m.Username, true)
		return err
	}},
}

func resetLinkChange(name string, opts ResetLinkOptions) credentialChange {
	var token string
	return credentialChange{name: name, before: func(t *testing.T, st Store, m *Member) {
		var err error
		if token, _, _, err = st.CreateResetLink(t.Context(), m.Username, time.Hour, opts); err != nil {
			t.Fatal(err)
		}
	}, change: func(ctx context.Context, st Store, m *Member) error {
		_, err := st.UseResetLink(ctx, token, "a new password")
		return err
	}}
}

// signInRead is the sign-in's read: the member, with its password checked.
func signInRead(t *testing.T, st Store, username string) *Member {
	t.Helper()
	m, err := st.Authenticate(t.Context(), username, "correct horse")
	if err != nil {
		t.Fatalf("sign-in before the change: %v", err)
	}
	return m
}

// refusedSignIn reports whether err is CreateSessionWith's refusal of a
// sign-in that read the member before a change of its credentials.
func refusedSignIn(err error) bool {
	return errors.Is(err, ErrCredentialsChanged) || errors.Is(err, ErrSuspended)
}

// assertNoSession checks that the session id (if any) does not sign anyone
// in and is not listed on the member's account page.
func assertNoSession(t *testing.T, st Store, m *Member, id string) {
	t.Helper()
	if id != "" {
		if got, err := st.SessionMember(t.Context(), id); err == nil {
			t.Fatalf("the session made by the sign-in that read the old credentials signs %s in", got.Username)
		}
	}
	list, err := st.Sessions(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("the account page lists %d sessions after the change, want none", len(list))
	}
}

// TestCredentialChangeEndsSignInsInFlight plays a sign-in (its read of the
// member and password, then its session write) against every change of
// credentials in each order the two can take, through the engine itself
// (storagetest.Interleaver): no order leaves a session.
func TestCredentialChangeEndsSignInsInFlight(t *testing.T) {
	store, il := storagetest.OpenInterleaved(t)
	st := Of(store)
	for i, c := range credentialChanges {
		newMember := func(t *testing.T, order int) *Member {
			m, err := st.CreateMember(t.Context(), "m"+itoa(i)+"_"+itoa(order), "", "correct horse")
			if err != nil {
				t.Fatal(err)
			}
			if c.before != nil {
				c.before(t, st, m)
			}
			return m
		}
		t.Run(c.name, func(t *testing.T) {
			t.Run("change between the read and the session write", func(t *testing.T) {
				m := newMember(t, 0)
				read := signInRead(t, st, m.Username)
				if err := c.change(t.Context(), st, m); err != nil {
					t.Fatal(err)
				}
				id, err := st.CreateSessionWith(t.Context(), read, time.Hour, SessionInfo{})
				if !refusedSignIn(err) {
					t.Fatalf("session write after the change: %v, want ErrCredentialsChanged", err)
				}
				assertNoSession(t, st, m, id)
			})
			t.Run("change committed inside the session write", func(t *testing.T) {
				m := newMember(t, 1)
				read := signInRead(t, st, m.Username)
				var changeErr error
				il.BeforeCommit(sessionKey(""), func() { changeErr = c.change(t.Context(), st, m) })
				id, err := st.CreateSessionWith(t.Context(), read, time.Hour, SessionInfo{})
				if changeErr != nil {
					t.Fatal(changeErr)
				}
				if !refusedSignIn(err) {
					t.Fatalf("session write around the change: %v, want ErrCredentialsChanged", err)
				}
				assertNoSession(t, st, m, id)
			})
			t.Run("session write committed inside the change", func(t *testing.T) {
				m := newMember(t, 2)
				read := signInRead(t, st, m.Username)
				var id string
				var sessErr error
				il.BeforeCommit(memberIDKey(m.ID), func() {
					id, sessErr = st.CreateSessionWith(t.Context(), read, time.Hour, SessionInfo{})
				})
				if err := c.change(t.Context(), st, m); err != nil {
					t.Fatal(err)
				}
				if sessErr != nil {
					t.Fatalf("the session write before the change committed failed: %v", sessErr)
				}
				assertNoSession(t, st, m, id)
			})
			t.Run("change between the password and the code", func(t *testing.T) {
				m := newMember(t, 3)
				read := signInRead(t, st, m.Username)
				secret, err := st.CreateSignInChallenge(t.Context(), read)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.change(t.Context(), st, m); err != nil {
					t.Fatal(err)
				}
				if _, err := st.SignInChallengeMember(t.Context(), secret); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("the code page after the change: %v, want the challenge gone", err)
				}
				code, _ := TOTPCode(testSecret, time.Now())
				if _, _, err := st.AnswerSignInChallenge(t.Context(), secret, code); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("a code after the change: %v, want the challenge gone", err)
				}
			})
		})
	}
}

// TestCredentialChangeKeepsTheBrowserThatMadeIt: the session that changed
// the password or the second factor stays signed in (it was given the new
// stamp); the member's other sessions end.
func TestCredentialChangeKeepsTheBrowserThatMadeIt(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	here, _ := st.CreateSession(t.Context(), m.ID, time.Hour)
	other, _ := st.CreateSession(t.Context(), m.ID, time.Hour)
	steps := []struct {
		name   string
		change func() error
	}{
		{"password", func() error {
			_, _, err := st.ChangePassword(t.Context(), m.ID, "a new password", here, false)
			return err
		}},
		{"two-factor on", func() error {
			if err := st.StartTwoFactorSetup(t.Context(), m.ID, testSecret); err != nil {
				return err
			}
			code, _ := TOTPCode(testSecret, time.Now())
			_, err := st.ConfirmTwoFactor(t.Context(), m.ID, code, here)
			return err
		}},
		{"two-factor off", func() error { return st.DisableTwoFactor(t.Context(), m.ID, here) }},
		{"passkey added", func() error {
			cur, err := st.MemberByID(t.Context(), m.ID)
			if err != nil {
				return err
			}
			_, err = st.AddPasskey(t.Context(), cur, "Phone", webauthn.Credential{ID: []byte("key")}, here)
			return err
		}},
		{"passkey removed", func() error { return st.RemovePasskey(t.Context(), m.ID, PasskeyID([]byte("key")), here) }},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if _, err := st.SessionMember(t.Context(), here); err != nil {
			t.Fatalf("after %s the browser that made it is signed out: %v", s.name, err)
		}
		if _, err := st.SessionMember(t.Context(), other); err == nil {
			t.Fatalf("after %s another session still works", s.name)
		}
		if list, _ := st.Sessions(t.Context(), m.ID); len(list) != 1 {
			t.Fatalf("after %s the account page lists %d sessions, want 1", s.name, len(list))
		}
		other, _ = st.CreateSession(t.Context(), m.ID, time.Hour)
	}
}

// TestConcurrentSignInsAndCredentialChanges runs sign-ins with the old
// password in a loop while the credentials change (meant for -race): once
// a change has returned, no session made from the old password works.
func TestConcurrentSignInsAndCredentialChanges(t *testing.T) {
	st := openTestStore(t)
	for i, c := range credentialChanges {
		t.Run(c.name, func(t *testing.T) {
			m, err := st.CreateMember(t.Context(), "c"+itoa(i), "", "correct horse")
			if err != nil {
				t.Fatal(err)
			}
			if c.before != nil {
				c.before(t, st, m)
			}
			// Sessions made from a read of the member before the change
			// must end; a two-factor change keeps the password, so the
			// loops may also sign in anew after it, which is fine.
			old, err := st.MemberByID(t.Context(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu  sync.Mutex
				ids []string
			)
			stop := storagetest.Loop(2, func() bool {
				read, err := st.Authenticate(context.Background(), m.Username, "correct horse")
				if err != nil {
					return false // the change is done: the old password no longer works
				}
				if read.SecurityStamp != old.SecurityStamp {
					return false // read after the change
				}
				if id, err := st.CreateSessionWith(context.Background(), read, time.Hour, SessionInfo{}); err == nil {
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
				return true
			})
			// Let the loops make some sessions before the change.
			storagetest.Eventually(t, "a session from the old password", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ids) > 0
			})
			err = c.change(t.Context(), st, m)
			stop()
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if _, err := st.SessionMember(t.Context(), id); err == nil {
					t.Fatalf("a session made from the old password works after the change (%d sessions made)", len(ids))
				}
			}
		})
	}
}

func itoa(i int) string { return string(rune('a' + i)) }

// TestPasskeysOfAMember: a member's passkeys are listed oldest first,
// renamed without a change of credentials, bounded in number, never
// registered twice, and gone with the member; a ceremony answers once and
// only for its purpose.
func TestPasskeysOfAMember(t *testing.T) {
	st := openTestStore(t)
	ctx := t.Context()
	m, _ := st.CreateMember(ctx, "alice", "", "correct horse")
	add := func(id string) error {
		cur, err := st.MemberByID(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.AddPasskey(ctx, cur, "  Key "+id+"\n", webauthn.Credential{ID: []byte(id)}, "")
		return err
	}
	for i := range MaxPasskeysPerMember {
		if err := add(strconv.Itoa(i)); err != nil {
			t.Fatalf("passkey %d: %v", i, err)
		}
	}
	if err := add("one more"); !errors.Is(err, ErrTooManyPasskeys) {
		t.Fatalf("passkey beyond the bound: %v, want ErrTooManyPasskeys", err)
	}
	if err := st.RemovePasskey(ctx, m.ID, PasskeyID([]byte("1")), ""); err != nil {
		t.Fatal(err)
	}
	if err := add("0"); !errors.Is(err, ErrPasskeyExists) {
		t.Fatalf("the same credential again: %v, want ErrPasskeyExists", err)
	}
	before, _ := st.MemberByID(ctx, m.ID)
	if err := st.RenamePasskey(ctx, m.ID, PasskeyID([]byte("0")), "Phone"); err != nil {
		t.Fatal(err)
	}
	if after, _ := st.MemberByID(ctx, m.ID); after.SecurityStamp != before.SecurityStamp {
		t.Fatal("renaming a passkey renewed the security stamp")
	}
	keys, err := st.Passkeys(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != MaxPasskeysPerMember-1 || keys[0].Name != "Phone" || keys[1].Name != "Key 2" {
		t.Fatalf("passkeys: %d, first %q, second %q", len(keys), keys[0].Name, keys[1].Name)
	}
	if err := st.RemovePasskey(ctx, m.ID, PasskeyID([]byte("1")), ""); !errors.Is(err, ErrPasskeyNotFound) {
		t.Fatalf("removing a removed passkey: %v", err)
	}

	secret, err := st.StartPasskeyCeremony(ctx, PasskeyCeremony{Purpose: "register", MemberID: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TakePasskeyCeremony(ctx, secret, "sign_in"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a ceremony for another purpose: %v", err)
	}
	secret, _ = st.StartPasskeyCeremony(ctx, PasskeyCeremony{Purpose: "register", MemberID: m.ID})
	if c, err := st.TakePasskeyCeremony(ctx, secret, "register"); err != nil || c.MemberID != m.ID {
		t.Fatalf("the ceremony: %v %+v", err, c)
	}
	if _, err := st.TakePasskeyCeremony(ctx, secret, "register"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the ceremony a second time: %v", err)
	}

	if err := st.DeleteMember(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if keys, _ := st.Passkeys(ctx, m.ID); len(keys) != 0 {
		t.Fatalf("%d passkeys outlive their member", len(keys))
	}
}
