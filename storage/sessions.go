package storage

import (
	"errors"
	"time"
)

// Session is a signed-in browser. Its id is a secret kept by the browser in
// a cookie; the store holds only its digest.
type Session struct {
	MemberID  string    `json:"member_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionPrefix starts every session id, so a leaked value is recognisable.
const SessionPrefix = "hs_"

func sessionKey(digest string) []byte { return key("session", digest) }
func memberSessionKey(memberID, digest string) []byte {
	return key("member", "sess", memberID, digest)
}

// CreateSession starts a session for memberID lasting ttl and returns its id.
func (s *Store) CreateSession(memberID string, ttl time.Duration) (string, error) {
	id := NewSecret(SessionPrefix, 32)
	d := Digest(id)
	now := time.Now().UTC()
	sess := Session{MemberID: memberID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	err := s.Update(func(tx *Tx) error {
		if _, err := tx.MemberByID(memberID); err != nil {
			return err
		}
		if err := tx.putJSON(sessionKey(d), sess, ttl); err != nil {
			return err
		}
		return tx.put(memberSessionKey(memberID, d), nil, ttl)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// SessionMember returns the member signed in with session id. It returns
// ErrNotFound for unknown or expired sessions and ErrSuspended for a
// suspended member.
func (s *Store) SessionMember(id string) (*Member, error) {
	if len(id) < len(SessionPrefix)+16 || len(id) > 128 {
		return nil, ErrNotFound
	}
	var m *Member
	err := s.View(func(tx *Tx) error {
		var sess Session
		if err := tx.getJSON(sessionKey(Digest(id)), &sess); err != nil {
			return err
		}
		var err error
		m, err = tx.MemberByID(sess.MemberID)
		if errors.Is(err, ErrNotFound) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Suspended {
		return nil, ErrSuspended
	}
	return m, nil
}

// DeleteSession ends a session; unknown ids are ignored.
func (s *Store) DeleteSession(id string) error {
	d := Digest(id)
	return s.Update(func(tx *Tx) error {
		var sess Session
		err := tx.getJSON(sessionKey(d), &sess)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.delete(sessionKey(d)); err != nil {
			return err
		}
		return tx.delete(memberSessionKey(sess.MemberID, d))
	})
}

func (tx *Tx) deleteMemberSessions(memberID string) error {
	digests, err := tx.suffixes(key("member", "sess", memberID, ""))
	if err != nil {
		return err
	}
	for _, d := range digests {
		if err := tx.delete(sessionKey(d)); err != nil {
			return err
		}
		if err := tx.delete(memberSessionKey(memberID, d)); err != nil {
			return err
		}
	}
	return nil
}
