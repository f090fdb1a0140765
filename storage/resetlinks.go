package storage

import (
	"errors"
	"strings"
	"time"
)

// Reset links: the operator's way to let a member who forgot their password
// set a new one without e-mail. A link's token is a random secret stored as
// a SHA-256 digest; it works once, until it expires.

// ResetTokenPrefix starts every reset link token.
const ResetTokenPrefix = "hrt_"

// Bounds of a reset link's lifetime.
const (
	DefaultResetLinkLifetime = 24 * time.Hour
	MaxResetLinkLifetime     = 7 * 24 * time.Hour
)

// ResetLink is what the store keeps of a reset link.
type ResetLink struct {
	MemberID  string    `json:"member_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// DisableTwoFactor: using the link also turns the member's two-factor
	// sign-in off (an operator resetting a member who lost their phone);
	// without it the link page asks for a code or recovery code.
	DisableTwoFactor bool `json:"disable_two_factor,omitempty"`
}

func resetKey(digest string) []byte { return key("reset", digest) }

// CreateResetLink makes a reset link token for username, valid for ttl
// (at most MaxResetLinkLifetime).
func (s *Store) CreateResetLink(username string, ttl time.Duration, disableTwoFactor bool) (string, *Member, *ResetLink, error) {
	if ttl <= 0 || ttl > MaxResetLinkLifetime {
		return "", nil, nil, Invalid("a reset link lasts more than 0 and at most %s", MaxResetLinkLifetime)
	}
	token := NewSecret(ResetTokenPrefix, 32)
	now := time.Now().UTC()
	link := &ResetLink{CreatedAt: now, ExpiresAt: now.Add(ttl), DisableTwoFactor: disableTwoFactor}
	var m *Member
	err := s.Update(func(tx *Tx) error {
		var err error
		m, err = tx.Member(username)
		if err != nil {
			return err
		}
		link.MemberID = m.ID
		return tx.putJSON(resetKey(Digest(token)), link, ttl)
	})
	if err != nil {
		return "", nil, nil, err
	}
	return token, m, link, nil
}

// ResetLinkMember returns the member and record of a live reset link, or
// ErrNotFound (unknown, used or expired, or the member is gone).
func (s *Store) ResetLinkMember(token string) (*Member, *ResetLink, error) {
	if !strings.HasPrefix(token, ResetTokenPrefix) || len(token) > 128 {
		return nil, nil, ErrNotFound
	}
	var m *Member
	var link ResetLink
	err := s.View(func(tx *Tx) error {
		if err := tx.getJSON(resetKey(Digest(token)), &link); err != nil {
			return err
		}
		if !time.Now().Before(link.ExpiresAt) {
			return ErrNotFound
		}
		var err error
		m, err = tx.MemberByID(link.MemberID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return m, &link, nil
}

// UseResetLink sets the password of the link's member, ends all its web
// sessions, turns two-factor sign-in off when the link says so, and uses
// the link up, in one transaction. The caller has checked the second factor
// when the member has one and the link does not turn it off.
func (s *Store) UseResetLink(token, password string) (*Member, error) {
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	hash := HashPassword(password)
	d := Digest(token)
	var m *Member
	err := s.Update(func(tx *Tx) error {
		var link ResetLink
		if err := tx.getJSON(resetKey(d), &link); err != nil {
			return err
		}
		if !time.Now().Before(link.ExpiresAt) {
			return ErrNotFound
		}
		var err error
		m, err = tx.MemberByID(link.MemberID)
		if err != nil {
			return err
		}
		if link.DisableTwoFactor {
			if err := tx.disableTwoFactor(m.ID); err != nil {
				return err
			}
			m.TwoFactor = false
		}
		m.PasswordHash = hash
		if err := tx.putJSON(memberIDKey(m.ID), m, 0); err != nil {
			return err
		}
		if err := tx.deleteMemberSessions(m.ID); err != nil {
			return err
		}
		return tx.delete(resetKey(d))
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	return m, err
}

func init() {
	// A deleted member's reset links go with it (they are few: an
	// operator makes them one at a time).
	memberCleanups = append(memberCleanups, func(tx *Tx, memberID string) error {
		return tx.deleteRecordsOf(key("reset", ""), memberID)
	})
}

// deleteRecordsOf deletes the records under prefix whose JSON names
// memberID as member_id.
func (tx *Tx) deleteRecordsOf(prefix []byte, memberID string) error {
	var keys [][]byte
	err := tx.scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		var rec struct {
			MemberID string `json:"member_id"`
		}
		if unmarshal(v, &rec) == nil && rec.MemberID == memberID {
			keys = append(keys, append([]byte{}, k...))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.delete(k); err != nil {
			return err
		}
	}
	return nil
}
