package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Member is a human account of the site, shared by every service.
type Member struct {
	ID           string    `json:"id"`
	Username     string    `json:"username"`
	DisplayName  string    `json:"display_name"`
	CreatedAt    time.Time `json:"created_at"`
	Suspended    bool      `json:"suspended"`
	PasswordHash string    `json:"password_hash"`
	// TwoFactor is on when the member signs in with a second factor (its
	// secret is a record of its own, see TwoFactor).
	TwoFactor bool `json:"two_factor,omitempty"`
}

// Limits on member fields, as Mastodon has them (passwords: at least 8
// characters; the upper bound keeps argon2 work per request bounded).
const (
	MaxDisplayNameLen = 30
	MinPasswordLen    = 8
	MaxPasswordLen    = 128
)

var usernameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,30}$`)

// ValidateUsername checks Mastodon's username rule.
func ValidateUsername(username string) error {
	if !usernameRE.MatchString(username) {
		return Invalid("username must be 1 to 30 letters, digits or underscores")
	}
	return nil
}

// ValidatePassword checks the password length rule.
func ValidatePassword(password string) error {
	n := utf8.RuneCountInString(password)
	if n < MinPasswordLen || n > MaxPasswordLen {
		return Invalid("password must be %d to %d characters long", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

func validateDisplayName(name string) error {
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxDisplayNameLen || hasControl(name) {
		return Invalid("display name must be at most %d characters on one line, without control characters", MaxDisplayNameLen)
	}
	return nil
}

// hasControl reports whether s holds a control character (NUL, line breaks,
// tabs, escapes...), which a one-line name shown on pages must not.
func hasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

func memberNameKey(username string) []byte { return key("member", "name", strings.ToLower(username)) }
func memberIDKey(id string) []byte         { return key("member", "id", id) }

// MemberDataPrefix is the key prefix under which repositories keep records
// owned by one member; DeleteMember removes all of it.
func memberDataPrefix(memberID string) []byte { return key("u", memberID, "") }

// memberCleanups are run inside DeleteMember's transaction by repositories
// that keep records outside the member's prefix (global lookup keys).
var memberCleanups []func(tx *Tx, memberID string) error

// OnMemberDelete registers fn to run inside DeleteMember's transaction:
// a domain package removes there the records of the member it keeps
// outside the member's prefix (global lookup keys). Call it from an init
// function.
func OnMemberDelete(fn func(tx *Tx, memberID string) error) {
	memberCleanups = append(memberCleanups, fn)
}

// accessRevokers end one kind of a member's access for
// RevokeMemberAccess (OnRevokeMemberAccess).
var accessRevokers []func(ctx context.Context, s *Store, memberID string) (tokens, apps int, err error)

// OnRevokeMemberAccess registers fn, which ends the member's access of a
// kind a domain package holds (storage/apitokens: API tokens;
// storage/grants: OAuth grants) and returns how many API tokens and
// applications it revoked, for RevokeMemberAccess. Call it from an init
// function.
func OnRevokeMemberAccess(fn func(ctx context.Context, s *Store, memberID string) (tokens, apps int, err error)) {
	accessRevokers = append(accessRevokers, fn)
}

// CreateMember adds a member. It returns an *InvalidError for a bad
// username, display name or password and ErrConflict when the username is
// taken (case-insensitively).
func (s *Store) CreateMember(ctx context.Context, username, displayName, password string) (*Member, error) {
	if err := ValidateUsername(username); err != nil {
		return nil, err
	}
	if err := validateDisplayName(displayName); err != nil {
		return nil, err
	}
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	m := &Member{
		Username:     username,
		DisplayName:  displayName,
		CreatedAt:    time.Now().UTC().Truncate(time.Second),
		PasswordHash: HashPassword(password),
	}
	err := s.Update(ctx, func(tx *Tx) error {
		taken, err := tx.has(memberNameKey(username))
		if err != nil {
			return err
		}
		if taken {
			return ErrConflict
		}
		if m.ID, err = tx.freshID(memberIDKey); err != nil {
			return err
		}
		if err := tx.put(memberNameKey(username), []byte(m.ID), 0); err != nil {
			return err
		}
		return tx.putJSON(memberIDKey(m.ID), m, 0)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Member returns the member with username (any case).
func (tx *Tx) Member(username string) (*Member, error) {
	if ValidateUsername(username) != nil {
		return nil, ErrNotFound
	}
	id, err := tx.get(memberNameKey(username))
	if err != nil {
		return nil, err
	}
	return tx.MemberByID(string(id))
}

// MemberByID returns the member with id.
func (tx *Tx) MemberByID(id string) (*Member, error) {
	var m Member
	if err := tx.getJSON(memberIDKey(id), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Member returns the member with username (any case).
func (s *Store) Member(ctx context.Context, username string) (m *Member, err error) {
	err = s.View(ctx, func(tx *Tx) error { m, err = tx.Member(username); return err })
	return m, err
}

// MemberByID returns the member with id.
func (s *Store) MemberByID(ctx context.Context, id string) (m *Member, err error) {
	err = s.View(ctx, func(tx *Tx) error { m, err = tx.MemberByID(id); return err })
	return m, err
}

// Members lists every member, ordered by username.
func (s *Store) Members(ctx context.Context) ([]*Member, error) {
	var out []*Member
	err := s.View(ctx, func(tx *Tx) error {
		return tx.scan(key("member", "id", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var m Member
			if err := json.Unmarshal(v, &m); err != nil {
				return false, err
			}
			out = append(out, &m)
			return true, nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Username) < strings.ToLower(out[j].Username) })
	return out, err
}

// Authenticate returns the member whose username and password match. Unknown
// usernames cost the same hashing work as wrong passwords. A suspended
// member gets ErrSuspended, and only when the password is right.
func (s *Store) Authenticate(ctx context.Context, username, password string) (*Member, error) {
	m, err := s.Member(ctx, username)
	if errors.Is(err, ErrNotFound) {
		CheckPassword(dummyHash, password)
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	if !CheckPassword(m.PasswordHash, password) {
		return nil, ErrBadCredentials
	}
	if m.Suspended {
		return nil, ErrSuspended
	}
	return m, nil
}

// Errors of Authenticate and session lookups.
var (
	ErrBadCredentials = errors.New("wrong username or password")
	ErrSuspended      = errors.New("this account is suspended")
)

// SetSuspended suspends or reinstates a member. Suspending ends every web
// session of the member at once; tokens of the other services check the flag
// on every use.
func (s *Store) SetSuspended(ctx context.Context, username string, suspended bool) (*Member, error) {
	var out *Member
	err := s.Update(ctx, func(tx *Tx) error {
		m, err := tx.Member(username)
		if err != nil {
			return err
		}
		m.Suspended = suspended
		if err := tx.putJSON(memberIDKey(m.ID), m, 0); err != nil {
			return err
		}
		if suspended {
			if err := tx.deleteMemberSessions(m.ID); err != nil {
				return err
			}
		}
		out = m
		return nil
	})
	return out, err
}

// SetPassword replaces a member's password and ends its web sessions.
func (s *Store) SetPassword(ctx context.Context, username, password string) error {
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash := HashPassword(password)
	return s.Update(ctx, func(tx *Tx) error {
		m, err := tx.Member(username)
		if err != nil {
			return err
		}
		m.PasswordHash = hash
		if err := tx.putJSON(memberIDKey(m.ID), m, 0); err != nil {
			return err
		}
		return tx.deleteMemberSessions(m.ID)
	})
}

// DeleteMember removes a member and everything it owns.
func (s *Store) DeleteMember(ctx context.Context, username string) error {
	var id string
	err := s.Update(ctx, func(tx *Tx) error {
		m, err := tx.Member(username)
		if err != nil {
			return err
		}
		id = m.ID
		if err := tx.delete(memberNameKey(m.Username)); err != nil {
			return err
		}
		if err := tx.delete(memberIDKey(m.ID)); err != nil {
			return err
		}
		if err := tx.deleteMemberSessions(m.ID); err != nil {
			return err
		}
		for _, clean := range memberCleanups {
			if err := clean(tx, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The member's own records can be many, more than one transaction may
	// hold, so they go in batches after the member record. Nothing can reach
	// them in between: every lookup starts from the member. (Badger's
	// DropPrefix is not used: it blocks every other write while it runs.)
	return s.DeletePrefixInBatches(ctx, memberDataPrefix(id))
}

// DeletePrefixInBatches deletes every key with prefix, a bounded number of
// keys (1000) per transaction, for more keys than one transaction may hold.
// It is not atomic: an error leaves the batches before it deleted, and
// keys written under prefix meanwhile may or may not be deleted.
func (s *Store) DeletePrefixInBatches(ctx context.Context, prefix []byte) error {
	const batch = 1000
	for {
		n := 0
		err := s.Update(ctx, func(tx *Tx) error {
			n = 0
			var keys [][]byte
			err := tx.scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
				keys = append(keys, append([]byte{}, k...))
				return len(keys) < batch, nil
			})
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := tx.delete(k); err != nil {
					return err
				}
			}
			n = len(keys)
			return nil
		})
		if err != nil {
			return fmt.Errorf("delete member records: %w", err)
		}
		if n < batch {
			return nil
		}
	}
}

// SetDisplayName changes a member's display name.
func (s *Store) SetDisplayName(ctx context.Context, memberID, name string) (*Member, error) {
	if err := validateDisplayName(name); err != nil {
		return nil, err
	}
	var out *Member
	err := s.Update(ctx, func(tx *Tx) error {
		m, err := tx.MemberByID(memberID)
		if err != nil {
			return err
		}
		m.DisplayName = name
		out = m
		return tx.putJSON(memberIDKey(m.ID), m, 0)
	})
	return out, err
}

// ChangePassword replaces memberID's password and ends its web sessions
// except the one whose cookie secret is keepSession (the browser that made
// the change). The caller has checked the current password.
func (s *Store) ChangePassword(ctx context.Context, memberID, password, keepSession string) error {
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash := HashPassword(password)
	keep := ""
	if keepSession != "" {
		keep = Digest(keepSession)
	}
	return s.Update(ctx, func(tx *Tx) error {
		m, err := tx.MemberByID(memberID)
		if err != nil {
			return err
		}
		m.PasswordHash = hash
		if err := tx.putJSON(memberIDKey(m.ID), m, 0); err != nil {
			return err
		}
		_, err = tx.deleteMemberSessionsExcept(m.ID, keep)
		return err
	})
}

// RevokeMemberAccess ends every API token and OAuth grant of memberID (its
// web sessions stay), and returns how many tokens and apps it revoked,
// through the packages that hold them (OnRevokeMemberAccess:
// storage/apitokens, storage/grants).
func (s *Store) RevokeMemberAccess(ctx context.Context, memberID string) (tokens, apps int, err error) {
	for _, revoke := range accessRevokers {
		t, a, err := revoke(ctx, s, memberID)
		tokens, apps = tokens+t, apps+a
		if err != nil {
			return tokens, apps, err
		}
	}
	return tokens, apps, nil
}
