package members

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
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
	// RevokeAccess: using the link also revokes the member's API tokens
	// and OAuth grants (RevokeMemberAccess), for an account the operator
	// believes compromised: a new password alone leaves them working.
	RevokeAccess bool `json:"revoke_access,omitempty"`
}

// ResetLinkOptions are what using a reset link does besides setting the
// password and ending the member's sessions.
type ResetLinkOptions struct {
	DisableTwoFactor bool // see ResetLink.DisableTwoFactor
	RevokeAccess     bool // see ResetLink.RevokeAccess
}

func resetKey(digest string) []byte { return storage.Key("reset", digest) }

// CreateResetLink makes a reset link token for username, valid for ttl
// (at most MaxResetLinkLifetime).
func (s Store) CreateResetLink(ctx context.Context, username string, ttl time.Duration, opts ResetLinkOptions) (string, *Member, *ResetLink, error) {
	if ttl <= 0 || ttl > MaxResetLinkLifetime {
		return "", nil, nil, storage.Invalid("a reset link lasts more than 0 and at most %s", MaxResetLinkLifetime)
	}
	token := storage.NewSecret(ResetTokenPrefix, 32)
	now := time.Now().UTC()
	link := &ResetLink{CreatedAt: now, ExpiresAt: now.Add(ttl), DisableTwoFactor: opts.DisableTwoFactor, RevokeAccess: opts.RevokeAccess}
	var m *Member
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var err error
		m, err = ByUsername(tx, username)
		if err != nil {
			return err
		}
		link.MemberID = m.ID
		return tx.PutJSON(resetKey(storage.Digest(token)), link, ttl)
	})
	if err != nil {
		return "", nil, nil, err
	}
	return token, m, link, nil
}

// ResetLinkMember returns the member and record of a live reset link, or
// storage.ErrNotFound (unknown, used or expired, or the member is gone).
func (s Store) ResetLinkMember(ctx context.Context, token string) (*Member, *ResetLink, error) {
	if !strings.HasPrefix(token, ResetTokenPrefix) || len(token) > 128 {
		return nil, nil, storage.ErrNotFound
	}
	var m *Member
	var link ResetLink
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(resetKey(storage.Digest(token)), &link); err != nil {
			return err
		}
		if !time.Now().Before(link.ExpiresAt) {
			return storage.ErrNotFound
		}
		var err error
		m, err = ByID(tx, link.MemberID)
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
//
// A link made with RevokeAccess also revokes the member's API tokens, feed
// URLs and OAuth grants (RevokeMemberAccess) in that transaction: a failure
// changes nothing and leaves the link for another try.
func (s Store) UseResetLink(ctx context.Context, token, password string) (*Member, error) {
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	hash := HashPassword(password)
	d := storage.Digest(token)
	var m *Member
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var link ResetLink
		if err := tx.GetJSON(resetKey(d), &link); err != nil {
			return err
		}
		if !time.Now().Before(link.ExpiresAt) {
			return storage.ErrNotFound
		}
		var err error
		m, err = ByID(tx, link.MemberID)
		if err != nil {
			return err
		}
		if link.DisableTwoFactor {
			if _, err := disableTwoFactor(tx, m.ID); err != nil {
				return err
			}
			m.TwoFactor = false
		}
		m.PasswordHash = hash
		if _, err := renewStamp(tx, m, ""); err != nil {
			return err
		}
		if link.RevokeAccess {
			if _, _, err := revokeAccess(tx, m); err != nil {
				return err
			}
		}
		return tx.Delete(resetKey(d))
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// deleteMemberResetLinks removes a deleted member's reset links (they are
// few: an operator makes them one at a time).
func deleteMemberResetLinks(tx *storage.Tx, memberID string) error {
	return deleteRecordsOf(tx, storage.Key("reset", ""), memberID)
}

// deleteRecordsOf deletes the records under prefix whose JSON names
// memberID as member_id.
func deleteRecordsOf(tx *storage.Tx, prefix []byte, memberID string) error {
	var keys [][]byte
	err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		var rec struct {
			MemberID string `json:"member_id"`
		}
		if json.Unmarshal(v, &rec) == nil && rec.MemberID == memberID {
			keys = append(keys, append([]byte{}, k...))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
