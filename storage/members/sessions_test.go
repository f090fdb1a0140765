package members

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

func TestSessionMetadataListAndEnd(t *testing.T) {
	st := openTestStore(t)
	alice, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	bob, _ := st.CreateMember(t.Context(), "bob", "", "correct horse")
	long := strings.Repeat("é", 100) + "\x00\n"
	phone, err := st.CreateSessionWith(t.Context(), alice, time.Hour, SessionInfo{Device: "Firefox on Android", Address: "198.51.100.7"})
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := st.CreateSessionWith(t.Context(), alice, time.Hour, SessionInfo{Device: long, Address: long})
	if err != nil {
		t.Fatal(err)
	}
	third, _ := st.CreateSession(t.Context(), alice.ID, time.Hour)
	bobs, _ := st.CreateSession(t.Context(), bob.ID, time.Hour)

	list, err := st.Sessions(t.Context(), alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("alice has %d sessions, want 3", len(list))
	}
	byID := map[string]*Session{}
	for _, s := range list {
		if len(s.ID) != SessionPublicIDLen {
			t.Fatalf("public id %q", s.ID)
		}
		if strings.Contains(phone, s.ID) || strings.Contains(laptop, s.ID) {
			t.Fatal("the public id is part of the cookie secret")
		}
		byID[s.ID] = s
	}
	p := byID[SessionPublicID(phone)]
	if p == nil || p.Device != "Firefox on Android" || p.Address != "198.51.100.7" || p.LastSeen().IsZero() {
		t.Fatalf("phone session: %+v", p)
	}
	l := byID[SessionPublicID(laptop)]
	if l == nil || len(l.Device) > MaxSessionDeviceLen || len(l.Address) > MaxSessionAddressLen || strings.ContainsAny(l.Device, "\x00\n") || !strings.HasPrefix(l.Device, "éé") {
		t.Fatalf("long metadata not clipped and cleaned: %+v", l)
	}

	// Touching updates last seen and the address, keeps the expiry.
	before := p.LastSeen()
	time.Sleep(10 * time.Millisecond)
	if err := st.TouchSession(t.Context(), phone, "203.0.113.9"); err != nil {
		t.Fatal(err)
	}
	_, got, err := st.SessionAndMember(t.Context(), phone)
	if err != nil || !got.LastSeen().After(before) || got.Address != "203.0.113.9" || !got.ExpiresAt.Equal(p.ExpiresAt) {
		t.Fatalf("after touch: %+v, %v (before %v)", got, err, before)
	}

	// Ending by public id: another member's id and malformed ids are refused.
	if err := st.EndSession(t.Context(), bob.ID, SessionPublicID(phone)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("bob ends alice's session: %v", err)
	}
	for _, bad := range []string{"", "zz", phone, storage.Digest(phone), SessionPublicID(phone)[:8]} {
		if err := st.EndSession(t.Context(), alice.ID, bad); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("EndSession(%q): %v", bad, err)
		}
	}
	if _, err := st.SessionMember(t.Context(), phone); err != nil {
		t.Fatalf("refused ends ended the session: %v", err)
	}
	if err := st.EndSession(t.Context(), alice.ID, SessionPublicID(phone)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionMember(t.Context(), phone); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ended session still works: %v", err)
	}
	// A touch after the end does not bring it back.
	if err := st.TouchSession(t.Context(), phone, "203.0.113.9"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionMember(t.Context(), phone); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("touch revived an ended session: %v", err)
	}

	n, err := st.EndOtherSessions(t.Context(), alice.ID, third)
	if err != nil || n != 1 {
		t.Fatalf("EndOtherSessions: %d, %v", n, err)
	}
	if _, err := st.SessionMember(t.Context(), laptop); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("other session survived: %v", err)
	}
	if _, err := st.SessionMember(t.Context(), third); err != nil {
		t.Fatalf("kept session ended: %v", err)
	}
	if _, err := st.SessionMember(t.Context(), bobs); err != nil {
		t.Fatalf("bob's session ended: %v", err)
	}
	if list, _ := st.Sessions(t.Context(), alice.ID); len(list) != 1 || list[0].ID != SessionPublicID(third) {
		t.Fatalf("sessions left: %+v", list)
	}
}

// A session written before sessions had metadata keeps working and is
// listed with its creation time as last seen.
func TestSessionWithoutMetadataKeepsWorking(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	id := storage.NewSecret(SessionPrefix, 32)
	d := storage.Digest(id)
	created := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	old := map[string]any{"member_id": m.ID, "created_at": created, "expires_at": created.Add(3 * time.Hour)}
	err := st.st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.PutJSON(sessionKey(d), old, 2*time.Hour); err != nil {
			return err
		}
		return tx.Put(memberSessionKey(m.ID, d), nil, 2*time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, sess, err := st.SessionAndMember(t.Context(), id)
	if err != nil || got.ID != m.ID || !sess.LastSeen().Equal(created) || sess.Device != "" {
		t.Fatalf("old session: %v %+v %v", got, sess, err)
	}
	if list, _ := st.Sessions(t.Context(), m.ID); len(list) != 1 || list[0].ID != SessionPublicID(id) {
		t.Fatalf("old session not listed: %+v", list)
	}
	if err := st.TouchSession(t.Context(), id, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if _, sess, _ := st.SessionAndMember(t.Context(), id); sess == nil || !sess.LastSeen().After(created) || sess.Address != "192.0.2.1" {
		t.Fatalf("old session after touch: %+v", sess)
	}
}

// Signing in beyond MaxSessionsPerMember ends the least recently used
// session, so a member's list stays bounded.
func TestSessionsPerMemberAreBounded(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	first, _ := st.CreateSession(t.Context(), m.ID, time.Hour)
	ids := []string{first}
	for range MaxSessionsPerMember - 1 {
		id, err := st.CreateSession(t.Context(), m.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// The first one is used again: the second is now the least recent.
	time.Sleep(5 * time.Millisecond)
	if err := st.TouchSession(t.Context(), first, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSession(t.Context(), m.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.Sessions(t.Context(), m.ID); len(list) != MaxSessionsPerMember {
		t.Fatalf("%d sessions, want %d", len(list), MaxSessionsPerMember)
	}
	if _, err := st.SessionMember(t.Context(), first); err != nil {
		t.Fatalf("the recently used session ended: %v", err)
	}
	if _, err := st.SessionMember(t.Context(), ids[1]); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the least recently used session survived: %v", err)
	}
}
