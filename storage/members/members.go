// Package members holds the site's members, shared by every service: the
// member records (username, display name, password hash, suspension, the
// security stamp that a change of credentials renews), web sessions,
// two-factor sign-in (TOTP secrets, recovery codes, sign-in
// challenges), password reset links and the password hashing, over the
// engine-agnostic core in storage (keys under "member/", "session/",
// "2fa/", "reset/" and "u/<member>/2fa/"). Deleting a member removes
// everything under its prefix "u/<member>/" and runs the hooks other
// domains register with OnDelete for what they keep elsewhere.
//
// A Store is a value holding only the *storage.Store. The cache of members
// is a kind declared here (Cache), so each storage.Store holds one, whatever
// value reads it: Of may be called anywhere, as often as wanted, without
// allocating.
package members

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Store is the members of one storage.Store.
type Store struct{ st *storage.Store }

// Of returns the members of st.
func Of(st *storage.Store) Store { return Store{st} }

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
	// SecurityStamp changes with every change of the member's credentials
	// (password, second factor, suspension: renewStamp). Sessions, sign-in
	// challenges and authorization codes carry the stamp of the member they
	// were made for, and are refused once it differs; they are created in
	// a transaction that reads the member record the change writes, so a
	// sign-in that checked the old password either commits before the
	// change (and its session is ended by it) or fails. Records written
	// before the stamp existed have it empty and match until the first
	// change.
	SecurityStamp string `json:"security_stamp,omitempty"`
	// Email is the member's address as the OpenID provider hands it to the
	// site's other apps; EmailVerified says the operator set it (Hearth
	// sends no mail, so an address a member types stays unverified).
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified,omitempty"`
	// Groups are the operator-managed groups the member belongs to (the
	// OpenID groups claim, hearth_gate's allow rules).
	Groups []string `json:"groups,omitempty"`
	// AccessGen is the generation of the member's access (OAuth grants):
	// every token, refresh token and authorization code carries the
	// generation it was issued in, and is refused once the member's has
	// moved on. Revoking the member's access (revokeAccess) moves it in
	// one write, whatever the number of tokens; their records are deleted
	// afterwards, in bounded batches (storage/grants' sweep). A counter
	// rather than a time: nodes' clocks may differ. Records written before
	// it existed have it zero, as the tokens of that time.
	AccessGen uint64 `json:"access_gen,omitempty"`
}

// ErrCredentialsChanged refuses a sign-in, a session or an authorization
// code made for the member as it was before its password, second factor or
// suspension changed: the member signs in again.
var ErrCredentialsChanged = errors.New("the account's password or sign-in settings changed meanwhile: sign in again")

// renewStamp gives m a new security stamp, writes it, and ends the
// member's web sessions except the one with digest keep (none when keep is
// ""), which is given the new stamp: the browser that made the change stays
// signed in. It returns how many live sessions it ended.
func renewStamp(tx *storage.Tx, m *Member, keep string) (int, error) {
	m.SecurityStamp = storage.NewSecret("", 12)
	if err := tx.PutJSON(memberIDKey(m.ID), m, 0); err != nil {
		return 0, err
	}
	n, err := deleteMemberSessionsExcept(tx, m.ID, keep)
	if err != nil || keep == "" {
		return n, err
	}
	return n, restampSession(tx, m, keep)
}

// CheckStamp checks, in tx, that m's record still has the security stamp
// m was read with and that it is not suspended, and returns the record.
// A domain that creates a credential from a member read earlier (a session
// from a checked password, a code from a session) calls it in the
// transaction that creates it, so the two conflict with a change.
func CheckStamp(tx *storage.Tx, m *Member) (*Member, error) {
	cur, err := ByID(tx, m.ID)
	if err != nil {
		return nil, err
	}
	if cur.SecurityStamp != m.SecurityStamp {
		return nil, ErrCredentialsChanged
	}
	if cur.Suspended {
		return nil, ErrSuspended
	}
	return cur, nil
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
		return storage.Invalid("username must be 1 to 30 letters, digits or underscores")
	}
	return nil
}

// ValidatePassword checks the password length rule.
func ValidatePassword(password string) error {
	n := utf8.RuneCountInString(password)
	if n < MinPasswordLen || n > MaxPasswordLen {
		return storage.Invalid("password must be %d to %d characters long", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

func validateDisplayName(name string) error {
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxDisplayNameLen || storage.HasControl(name) {
		return storage.Invalid("display name must be at most %d characters on one line, without control characters", MaxDisplayNameLen)
	}
	return nil
}

func memberNameKey(username string) []byte {
	return storage.Key("member", "name", strings.ToLower(username))
}
func memberIDKey(id string) []byte { return storage.Key("member", "id", id) }

// memberDeletingKey marks a deleted member whose own records are still
// being deleted (DeleteMember).
func memberDeletingKey(id string) []byte { return storage.Key("member", "deleting", id) }

// memberDataPrefix is the key prefix under which domains keep records
// owned by one member; DeleteMember removes all of it.
func memberDataPrefix(memberID string) []byte { return storage.Key("u", memberID, "") }

// memberCleanups are run inside DeleteMember's transaction by domains
// that keep records outside the member's prefix (global lookup keys). A
// registry rather than a parameter: members cannot import the packages
// above it, and a package that registers from init cleans up exactly when
// it is linked in, which is when its records can exist.
var memberCleanups []func(tx *storage.Tx, memberID string) error

// OnDelete registers fn to run inside DeleteMember's transaction:
// a domain package removes there the records of the member it keeps
// outside the member's prefix (global lookup keys). Call it from an init
// function.
func OnDelete(fn func(tx *storage.Tx, memberID string) error) {
	memberCleanups = append(memberCleanups, fn)
}

// dataCleanups are run by deleteMemberData before the member's own
// records go (OnDeleteData).
var dataCleanups []func(ctx context.Context, st *storage.Store, memberID string) error

// OnDeleteData registers fn to run once a member is deleted, before its
// own records (under its prefix) are deleted: a domain deletes there, in
// transactions of its own, the records elsewhere that the member's own
// records name, when they may be more than DeleteMember's transaction can
// hold (storage/grants: the tokens of the member's index of its grants).
// fn must be idempotent: a run cut short runs again (deletions.go).
// Call it from an init function.
func OnDeleteData(fn func(ctx context.Context, st *storage.Store, memberID string) error) {
	dataCleanups = append(dataCleanups, fn)
}

// accessRevokers end one kind of a member's access for
// RevokeMemberAccess (OnRevokeAccess): a registry for memberCleanups'
// reason.
var accessRevokers []func(tx *storage.Tx, m *Member) (tokens, apps int, err error)

// OnRevokeAccess registers fn, which ends the member's access of a
// kind a domain package holds (storage/apitokens: API tokens and feed
// URLs; storage/grants: OAuth grants) in tx and returns how many API
// tokens and applications it revoked, for RevokeMemberAccess and the
// password changes that revoke access with it. m is the member as it is
// before the revocation (its AccessGen the generation that ends). fn's
// work must be bounded whatever the member holds: what it cannot delete
// in a few writes, it lets AccessGen refuse. Call it from an init
// function.
func OnRevokeAccess(fn func(tx *storage.Tx, m *Member) (tokens, apps int, err error)) {
	accessRevokers = append(accessRevokers, fn)
}

// revokeAccess ends every API token, feed URL and OAuth grant of m in tx
// (OnRevokeAccess), then moves m's AccessGen on and writes m.
func revokeAccess(tx *storage.Tx, m *Member) (tokens, apps int, err error) {
	for _, revoke := range accessRevokers {
		t, a, err := revoke(tx, m)
		if err != nil {
			return 0, 0, err
		}
		tokens, apps = tokens+t, apps+a
	}
	m.AccessGen++
	return tokens, apps, tx.PutJSON(memberIDKey(m.ID), m, 0)
}

// CreateMember adds a member. It returns an *InvalidError for a bad
// username, display name or password and storage.ErrConflict when the username is
// taken (case-insensitively).
func (s Store) CreateMember(ctx context.Context, username, displayName, password string) (*Member, error) {
	m, err := newMember(username, displayName, password)
	if err != nil {
		return nil, err
	}
	if err := s.st.Update(ctx, func(tx *storage.Tx) error { return putNewMember(tx, m) }); err != nil {
		return nil, err
	}
	return m, nil
}

// CreateMemberSignedIn is CreateMember and CreateSessionWith in one
// transaction (a sign-up): the account is made with its first session or
// not at all, so a store that stops taking writes in between (a full
// disk, a reload) cannot leave an account the visitor was told was not
// made, whose username a second try finds taken. It returns the member
// and the session's id.
func (s Store) CreateMemberSignedIn(ctx context.Context, username, displayName, password string, ttl time.Duration, info SessionInfo) (*Member, string, error) {
	m, err := newMember(username, displayName, password)
	if err != nil {
		return nil, "", err
	}
	var id string
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := putNewMember(tx, m); err != nil {
			return err
		}
		var d string
		var sess Session
		id, d, sess = newSession(m, ttl, info, true)
		return putSession(tx, d, sess, ttl)
	})
	if err != nil {
		return nil, "", err
	}
	return m, id, nil
}

// newMember checks a new member's fields and makes its record (no id yet).
func newMember(username, displayName, password string) (*Member, error) {
	if err := ValidateUsername(username); err != nil {
		return nil, err
	}
	if err := validateDisplayName(displayName); err != nil {
		return nil, err
	}
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	return &Member{
		Username:     username,
		DisplayName:  displayName,
		CreatedAt:    time.Now().UTC().Truncate(time.Second),
		PasswordHash: HashPassword(password),
	}, nil
}

// putNewMember gives m a fresh id and writes it, or returns
// storage.ErrConflict when its username is taken.
func putNewMember(tx *storage.Tx, m *Member) error {
	taken, err := tx.Has(memberNameKey(m.Username))
	if err != nil {
		return err
	}
	if taken {
		return storage.ErrConflict
	}
	if m.ID, err = tx.FreshID(memberIDKey); err != nil {
		return err
	}
	if err := tx.Put(memberNameKey(m.Username), []byte(m.ID), 0); err != nil {
		return err
	}
	// Counted before the record is written, for countIn's catch-up
	// (DeleteMember's reason).
	if err := addToCount(tx, 1); err != nil {
		return err
	}
	return tx.PutJSON(memberIDKey(m.ID), m, 0)
}

// ByUsername returns the member with username (any case) in tx.
func ByUsername(tx *storage.Tx, username string) (*Member, error) {
	if ValidateUsername(username) != nil {
		return nil, storage.ErrNotFound
	}
	id, err := tx.Get(memberNameKey(username))
	if err != nil {
		return nil, err
	}
	return ByID(tx, string(id))
}

// ByID returns the member with id in tx.
func ByID(tx *storage.Tx, id string) (*Member, error) {
	var m Member
	if err := tx.GetJSON(memberIDKey(id), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Member returns the member with username (any case).
func (s Store) Member(ctx context.Context, username string) (m *Member, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error { m, err = ByUsername(tx, username); return err })
	return m, err
}

// MemberByID returns the member with id.
func (s Store) MemberByID(ctx context.Context, id string) (m *Member, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error { m, err = ByID(tx, id); return err })
	return m, err
}

// Members lists every member, ordered by username.
func (s Store) Members(ctx context.Context) ([]*Member, error) {
	var out []*Member
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return tx.Scan(storage.Key("member", "id", ""), nil, false, false, func(_, v []byte) (bool, error) {
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
func (s Store) Authenticate(ctx context.Context, username, password string) (*Member, error) {
	m, err := s.Member(ctx, username)
	if errors.Is(err, storage.ErrNotFound) {
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
func (s Store) SetSuspended(ctx context.Context, username string, suspended bool) (*Member, error) {
	var out *Member
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByUsername(tx, username)
		if err != nil {
			return err
		}
		m.Suspended = suspended
		out = m
		if suspended {
			_, err := renewStamp(tx, m, "")
			return err
		}
		return tx.PutJSON(memberIDKey(m.ID), m, 0)
	})
	return out, err
}

// SetPassword replaces a member's password and ends its web sessions and
// the sign-ins in flight (renewStamp).
func (s Store) SetPassword(ctx context.Context, username, password string) error {
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash := HashPassword(password)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByUsername(tx, username)
		if err != nil {
			return err
		}
		m.PasswordHash = hash
		_, err = renewStamp(tx, m, "")
		return err
	})
}

// DeleteMember removes a member and everything it owns. Its error is the
// member record's deletion's: once that is committed the member is gone,
// and the rest follows (deleteMemberData).
func (s Store) DeleteMember(ctx context.Context, username string) error {
	var id string
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByUsername(tx, username)
		if err != nil {
			return err
		}
		id = m.ID
		if err := tx.Delete(memberNameKey(m.Username)); err != nil {
			return err
		}
		// Counted before the record goes, so a catch-up count (countIn)
		// still finds it, whether or not the engine's scan sees the
		// transaction's own deletions.
		if err := addToCount(tx, -1); err != nil {
			return err
		}
		if err := tx.Delete(memberIDKey(m.ID)); err != nil {
			return err
		}
		for _, clean := range []func(tx *storage.Tx, memberID string) error{deleteMemberSessions, deleteMemberResetLinks, deleteMemberChallenges} {
			if err := clean(tx, m.ID); err != nil {
				return err
			}
		}
		for _, clean := range memberCleanups {
			if err := clean(tx, m.ID); err != nil {
				return err
			}
		}
		return tx.Put(memberDeletingKey(m.ID), nil, 0)
	})
	if err != nil {
		return err
	}
	// The member is deleted from here on, whatever the caller does next: a
	// client that leaves (its request's context ends) does not cut the
	// records' deletion short, and a failure of it is not the deletion's
	// (the member is gone; the mark has the retry finish it: deletions.go).
	ctx = context.WithoutCancel(ctx)
	retry := deleterKind.Of(s.st)
	retry.begin(id)
	err = s.deleteMemberData(ctx, id)
	retry.end(id)
	if err != nil {
		s.st.Logger().Warn("the records of a deleted member are deleted later", zap.String("member", id), zap.Error(err))
		retry.failed(ctx, id)
	}
	return nil
}

// deleteMemberData deletes a deleted member's own records, then the mark
// that they were left (memberDeletingKey). They can be many, more than one
// transaction may hold, so they go in batches after the member record.
// Nothing can reach them in between: every lookup starts from the member.
// A run cut short (the store stopped taking writes, the process stopped)
// leaves the mark, which the store's retry (deleter) or its next opening
// (finishDeletions) finishes. (Badger's DropPrefix is not used: it blocks every
// other write while it runs.)
func (s Store) deleteMemberData(ctx context.Context, id string) error {
	for _, clean := range dataCleanups {
		if err := clean(ctx, s.st, id); err != nil {
			return err
		}
	}
	if err := s.st.DeletePrefixInBatches(ctx, memberDataPrefix(id)); err != nil {
		return err
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error { return tx.Delete(memberDeletingKey(id)) })
}

// SetDisplayName changes a member's display name.
func (s Store) SetDisplayName(ctx context.Context, memberID, name string) (*Member, error) {
	if err := validateDisplayName(name); err != nil {
		return nil, err
	}
	var out *Member
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByID(tx, memberID)
		if err != nil {
			return err
		}
		m.DisplayName = name
		out = m
		return tx.PutJSON(memberIDKey(m.ID), m, 0)
	})
	return out, err
}

// ChangePassword replaces memberID's password and ends its web sessions and
// sign-ins in flight except the session whose cookie secret is keepSession
// (the browser that made the change); with revoke it also ends the
// member's API tokens, feed URLs and OAuth grants (RevokeMemberAccess) and
// returns how many tokens and apps it revoked. It is one transaction: a
// store that stops taking writes midway leaves the old password and every
// token, never the new password beside tokens the member asked to end.
// The caller has checked the current password.
func (s Store) ChangePassword(ctx context.Context, memberID, password, keepSession string, revoke bool) (tokens, apps int, err error) {
	if err := ValidatePassword(password); err != nil {
		return 0, 0, err
	}
	hash := HashPassword(password)
	keep := keptDigest(keepSession)
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByID(tx, memberID)
		if err != nil {
			return err
		}
		m.PasswordHash = hash
		if _, err := renewStamp(tx, m, keep); err != nil {
			return err
		}
		tokens, apps = 0, 0
		if revoke {
			tokens, apps, err = revokeAccess(tx, m)
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return tokens, apps, nil
}

// RevokeMemberAccess ends every API token, feed URL and OAuth grant of
// memberID (its web sessions stay) in one transaction, and returns how many
// tokens and apps it revoked, through the packages that hold them
// (OnRevokeAccess: storage/apitokens, storage/grants).
func (s Store) RevokeMemberAccess(ctx context.Context, memberID string) (tokens, apps int, err error) {
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByID(tx, memberID)
		if err != nil {
			return err
		}
		tokens, apps, err = revokeAccess(tx, m)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return tokens, apps, nil
}

// Cache is the cache of members (by member id), which domain packages read
// with their records on hot paths (an OAuth or API token's member): a kind
// of the store's record caches (storage.NewCacheKind), dropped on every
// node by any write of a member record.
var Cache = storage.NewCacheKind[Member](memberIDKey(""))

// Cached returns the member with id from st's Cache, or reads it in tx;
// read says it was read, to be added with a generation taken before tx
// began.
func Cached(st *storage.Store, tx *storage.Tx, id string) (m *Member, read bool, err error) {
	if m = Cache.Of(st).Get(id); m != nil {
		return m, false, nil
	}
	m, err = ByID(tx, id)
	return m, err == nil, err
}
