package members

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Session is a signed-in browser. Its id is a secret kept by the browser in
// a cookie; the store holds only its digest. Device, Address and
// LastSeenAt are shown to the member on the account page; records written
// before they existed have them empty and keep working.
type Session struct {
	MemberID   string    `json:"member_id"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Device     string    `json:"device,omitempty"`
	Address    string    `json:"address,omitempty"`
	LastSeenAt time.Time `json:"last_seen_at,omitzero"`
	// Stamp is the member's security stamp when the session was made: a
	// session whose stamp is no longer the member's is ended (a change of
	// credentials renews the stamp and deletes the sessions; the stamp also
	// ends one whose creation committed while the change was running).
	Stamp string `json:"stamp,omitempty"`
	// AuthAt is when the member last gave its password (or second factor)
	// in this session: at sign-in, and again on the confirmation page
	// (ConfirmSession). The operations that change or delete the account
	// without asking for the password themselves need it recent
	// (RecentlyAuthenticated). Zero for records written before it existed.
	AuthAt time.Time `json:"auth_at,omitzero"`
	// AMR is how the member signed in (RFC 8176 method names: "pwd",
	// "otp", "hwk" for a passkey, "mfa" with two factors). Empty for
	// records written before it existed and for sessions the operator's
	// tools make.
	AMR []string `json:"amr,omitempty"`

	// ID is the session's public id (see SessionPublicID), filled in by
	// the lookups; it is not stored.
	ID string `json:"-"`
}

// LastSeen is when the session was last used, as far as the store knows:
// LastSeenAt, or CreatedAt for a session never touched since.
func (s *Session) LastSeen() time.Time {
	if s.LastSeenAt.IsZero() {
		return s.CreatedAt
	}
	return s.LastSeenAt
}

// SessionInfo is what a new session records about the browser.
type SessionInfo struct {
	Device  string
	Address string
	// AMR is how the member signed in (Session.AMR).
	AMR []string
}

// Bounds of the session metadata kept in the store.
const (
	MaxSessionDeviceLen  = 64
	MaxSessionAddressLen = 64
	// SessionPublicIDLen is the length of a session's public id: the first
	// hex digits of its digest. It names the session on the account page and
	// the CLI; it is not the cookie's secret and cannot be turned into it.
	SessionPublicIDLen = 16
	// MaxSessionsPerMember bounds a member's live sessions (and so the cost
	// of listing them): signing in beyond it ends the least recently used.
	MaxSessionsPerMember = 100
)

// SessionPrefix starts every session id, so a leaked value is recognisable.
const SessionPrefix = "hs_"

func sessionKey(digest string) []byte { return storage.Key("session", digest) }

// sessionCache is the cache of sessions (by digest): a kind of the store's
// record caches, dropped on every node by any write of a session record
// (a sign-out, an ended session, the last-seen time).
var sessionCache = storage.NewCacheKind[Session](sessionKey(""))

// keptDigest is the digest of the session whose cookie secret is
// keepSession, the one a change of credentials leaves signed in; "" keeps
// none.
func keptDigest(keepSession string) string {
	if keepSession == "" {
		return ""
	}
	return storage.Digest(keepSession)
}

// sessionByDigest reads the session whose id has digest d: nil, without an
// error, when there is none (ended, expired or never made).
func sessionByDigest(tx *storage.Tx, d string) (*Session, error) {
	var sess Session
	err := tx.GetJSON(sessionKey(d), &sess)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &sess, nil
}
func memberSessionKey(memberID, digest string) []byte {
	return storage.Key("member", "sess", memberID, digest)
}
func memberSessionsPrefix(memberID string) []byte { return storage.Key("member", "sess", memberID, "") }

// SessionPublicID is the public id of the session whose cookie secret is
// id: the first SessionPublicIDLen hex digits of its digest.
func SessionPublicID(id string) string { return storage.Digest(id)[:SessionPublicIDLen] }

// clip keeps s within n bytes on a rune boundary, without control characters.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	if len(s) <= n {
		return s
	}
	for n > 0 && !startsRune(s[n]) {
		n--
	}
	return s[:n]
}

func startsRune(b byte) bool { return b&0xC0 != 0x80 }

// CreateSession starts a session lasting ttl for memberID as it is now,
// with no password given in it (the operator's tools and tests; a sign-in
// uses CreateSessionWith with the member it checked), and returns its id.
func (s Store) CreateSession(ctx context.Context, memberID string, ttl time.Duration) (string, error) {
	m, err := s.MemberByID(ctx, memberID)
	if err != nil {
		return "", err
	}
	return s.createSession(ctx, m, ttl, SessionInfo{}, false)
}

// CreateSessionWith starts a session lasting ttl for m, as read when its
// password (and second factor) were checked (so the session counts as a
// recent sign-in: Session.AuthAt), recording the browser's device
// summary and client address (clipped to their bounds), and returns its id.
// It returns ErrCredentialsChanged when m's credentials changed since it was
// read, and ErrSuspended when m was suspended: the check reads the member
// record in the transaction that writes the session, so it conflicts with
// a change committed meanwhile (CheckStamp).
func (s Store) CreateSessionWith(ctx context.Context, m *Member, ttl time.Duration, info SessionInfo) (string, error) {
	return s.createSession(ctx, m, ttl, info, true)
}

// createSession is CreateSessionWith; signedIn says the password was just
// given (Session.AuthAt).
func (s Store) createSession(ctx context.Context, m *Member, ttl time.Duration, info SessionInfo, signedIn bool) (string, error) {
	id, d, sess := newSession(m, ttl, info, signedIn)
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if _, err := CheckStamp(tx, m); err != nil {
			return err
		}
		if err := trimMemberSessions(tx, m.ID, MaxSessionsPerMember-1); err != nil {
			return err
		}
		return putSession(tx, d, sess, ttl)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// newSession makes a session of m lasting ttl: its id (the cookie's
// secret), the id's digest (its key) and its record.
func newSession(m *Member, ttl time.Duration, info SessionInfo, signedIn bool) (id, digest string, sess Session) {
	id = storage.NewSecret(SessionPrefix, 32)
	now := time.Now().UTC()
	sess = Session{
		MemberID: m.ID, CreatedAt: now, ExpiresAt: now.Add(ttl), LastSeenAt: now,
		Device: clip(info.Device, MaxSessionDeviceLen), Address: clip(info.Address, MaxSessionAddressLen),
		Stamp: m.SecurityStamp, AMR: info.AMR,
	}
	if signedIn {
		sess.AuthAt = now
	}
	return id, storage.Digest(id), sess
}

// putSession writes a session (newSession) and its member's index of it.
func putSession(tx *storage.Tx, digest string, sess Session, ttl time.Duration) error {
	if err := tx.PutJSON(sessionKey(digest), sess, ttl); err != nil {
		return err
	}
	return tx.Put(memberSessionKey(sess.MemberID, digest), nil, ttl)
}

// SessionMember returns the member signed in with session id. It returns
// storage.ErrNotFound for unknown or expired sessions and ErrSuspended for a
// suspended member.
func (s Store) SessionMember(ctx context.Context, id string) (*Member, error) {
	m, _, err := s.SessionAndMember(ctx, id)
	return m, err
}

// SessionAndMember is SessionMember that also returns the session record.
// The session and its member come from the record caches when they are
// there (every member page reads them); any write of either drops it on
// every node, as for OAuth tokens (grants.Store.Token).
func (s Store) SessionAndMember(ctx context.Context, id string) (*Member, *Session, error) {
	if len(id) < len(SessionPrefix)+16 || len(id) > 128 {
		return nil, nil, storage.ErrNotFound
	}
	d := storage.Digest(id)
	sc, mc := sessionCache.Of(s.st), Cache.Of(s.st)
	sgen, mgen := sc.Generation(), mc.Generation()
	sess := sc.Get(d)
	var m *Member
	if sess != nil {
		m = mc.Get(sess.MemberID)
	}
	readSession, readMember := sess == nil, false
	if readSession || m == nil {
		err := s.st.View(ctx, func(tx *storage.Tx) error {
			if readSession {
				sess = new(Session)
				if err := tx.GetJSON(sessionKey(d), sess); err != nil {
					return err
				}
			}
			var err error
			m, readMember, err = Cached(s.st, tx, sess.MemberID)
			if errors.Is(err, storage.ErrNotFound) {
				return storage.ErrNotFound
			}
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if readSession {
		sc.Add(sgen, d, sess)
	}
	if readMember {
		mc.Add(mgen, m.ID, m)
	}
	// The engine drops an expired session's record; a cached copy
	// expires here.
	if !sess.ExpiresAt.IsZero() && !time.Now().Before(sess.ExpiresAt) {
		return nil, nil, storage.ErrNotFound
	}
	sess.ID = d[:SessionPublicIDLen]
	if sess.Stamp != m.SecurityStamp {
		return nil, nil, storage.ErrNotFound
	}
	if m.Suspended {
		return nil, nil, ErrSuspended
	}
	return m, sess, nil
}

// SessionCached reports whether session id's record is in this node's
// cache (a later SessionAndMember reads it from there): for the tests of
// the caches across nodes.
func (s Store) SessionCached(id string) bool {
	return sessionCache.Of(s.st).Get(storage.Digest(id)) != nil
}

// TouchSession records that session id was used now from address. The
// caller decides how often (a page view is a hot path: once every few
// minutes is enough). A session ended or expired meanwhile stays ended; the
// session keeps its expiry. The write is asynchronous: a last-seen time is
// not worth a disk sync.
func (s Store) TouchSession(ctx context.Context, id, address string) error {
	d := storage.Digest(id)
	return s.st.UpdateAsync(ctx, func(tx *storage.Tx) error {
		sess, err := sessionByDigest(tx, d)
		if sess == nil || err != nil {
			return err
		}
		now := time.Now().UTC()
		ttl := sess.ExpiresAt.Sub(now)
		if ttl <= time.Second {
			return nil
		}
		sess.LastSeenAt = now
		if address != "" {
			sess.Address = clip(address, MaxSessionAddressLen)
		}
		if err := tx.PutJSON(sessionKey(d), sess, ttl); err != nil {
			return err
		}
		return tx.Put(memberSessionKey(sess.MemberID, d), nil, ttl)
	})
}

// RecentSignIn is how long after the member gave its password in a session
// the operations that need a recent sign-in accept it (RecentlyAuthenticated),
// as GitHub's "sudo mode" does.
const RecentSignIn = 10 * time.Minute

// RecentlyAuthenticated reports whether the member gave its password in this
// session within RecentSignIn of now.
func (s *Session) RecentlyAuthenticated(now time.Time) bool {
	return !s.AuthAt.IsZero() && now.Sub(s.AuthAt) < RecentSignIn && !s.AuthAt.After(now.Add(time.Minute))
}

// ConfirmSession records that the member of session id gave its password
// again now (the caller checked it), for the operations that need a recent
// sign-in. It returns storage.ErrNotFound when the session has ended,
// expired, or belongs to credentials that changed since.
func (s Store) ConfirmSession(ctx context.Context, id string) error {
	d := storage.Digest(id)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var sess Session
		if err := tx.GetJSON(sessionKey(d), &sess); err != nil {
			return err
		}
		m, err := ByID(tx, sess.MemberID)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		ttl := sess.ExpiresAt.Sub(now)
		if sess.Stamp != m.SecurityStamp || m.Suspended || ttl <= time.Second {
			return storage.ErrNotFound
		}
		sess.AuthAt, sess.LastSeenAt = now, now
		return tx.PutJSON(sessionKey(d), sess, ttl)
	})
}

// Sessions lists memberID's live sessions, most recently seen first.
func (s Store) Sessions(ctx context.Context, memberID string) ([]*Session, error) {
	var out []*Session
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		digests, err := tx.Suffixes(memberSessionsPrefix(memberID))
		if err != nil {
			return err
		}
		m, err := ByID(tx, memberID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now := time.Now()
		for _, d := range digests {
			sess, err := sessionByDigest(tx, d)
			if err != nil {
				return err
			}
			if sess == nil || sess.MemberID != memberID || !now.Before(sess.ExpiresAt) || sess.Stamp != m.SecurityStamp {
				continue
			}
			sess.ID = d[:min(len(d), SessionPublicIDLen)]
			out = append(out, sess)
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastSeen().After(out[j].LastSeen()) })
	return out, err
}

// EndSession ends memberID's session whose public id is publicID. It
// returns storage.ErrNotFound when the member has no such session.
func (s Store) EndSession(ctx context.Context, memberID, publicID string) error {
	if len(publicID) != SessionPublicIDLen || strings.Trim(publicID, "0123456789abcdef") != "" {
		return storage.ErrNotFound
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		digests, err := tx.Suffixes(storage.Key("member", "sess", memberID, publicID))
		if err != nil {
			return err
		}
		if len(digests) == 0 {
			return storage.ErrNotFound
		}
		for _, rest := range digests {
			d := publicID + rest
			if err := tx.Delete(sessionKey(d)); err != nil {
				return err
			}
			if err := tx.Delete(memberSessionKey(memberID, d)); err != nil {
				return err
			}
		}
		return nil
	})
}

// EndOtherSessions ends every session of memberID except the one whose
// cookie secret is keep (none kept when keep is ""), and returns how many
// it ended.
func (s Store) EndOtherSessions(ctx context.Context, memberID, keep string) (int, error) {
	keepDigest := keptDigest(keep)
	n := 0
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var err error
		n, err = deleteMemberSessionsExcept(tx, memberID, keepDigest)
		return err
	})
	return n, err
}

// DeleteSession ends a session; unknown ids are ignored.
func (s Store) DeleteSession(ctx context.Context, id string) error {
	d := storage.Digest(id)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		sess, err := sessionByDigest(tx, d)
		if sess == nil || err != nil {
			return err
		}
		if err := tx.Delete(sessionKey(d)); err != nil {
			return err
		}
		return tx.Delete(memberSessionKey(sess.MemberID, d))
	})
}

// trimMemberSessions ends memberID's least recently used sessions (and
// index entries of ended ones) until at most keep are left.
func trimMemberSessions(tx *storage.Tx, memberID string, keep int) error {
	digests, err := tx.Suffixes(memberSessionsPrefix(memberID))
	if err != nil || len(digests) <= keep {
		return err
	}
	type live struct {
		digest string
		seen   time.Time
	}
	var sessions []live
	for _, d := range digests {
		sess, err := sessionByDigest(tx, d)
		if err != nil {
			return err
		}
		if sess != nil && time.Now().Before(sess.ExpiresAt) {
			sessions = append(sessions, live{d, sess.LastSeen()})
			continue
		}
		if err := tx.Delete(memberSessionKey(memberID, d)); err != nil {
			return err
		}
	}
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].seen.Before(sessions[j].seen) })
	for len(sessions) > keep {
		d := sessions[0].digest
		if err := tx.Delete(sessionKey(d)); err != nil {
			return err
		}
		if err := tx.Delete(memberSessionKey(memberID, d)); err != nil {
			return err
		}
		sessions = sessions[1:]
	}
	return nil
}

// restampSession gives m's session with digest d m's security stamp (a
// change of credentials keeps the browser that made it signed in). An
// ended or expired session stays ended.
func restampSession(tx *storage.Tx, m *Member, d string) error {
	sess, err := sessionByDigest(tx, d)
	if sess == nil || err != nil {
		return err
	}
	ttl := time.Until(sess.ExpiresAt)
	if sess.MemberID != m.ID || ttl <= time.Second {
		return nil
	}
	sess.Stamp = m.SecurityStamp
	return tx.PutJSON(sessionKey(d), sess, ttl)
}

func deleteMemberSessions(tx *storage.Tx, memberID string) error {
	_, err := deleteMemberSessionsExcept(tx, memberID, "")
	return err
}

// deleteMemberSessionsExcept deletes memberID's sessions but the one with
// digest keep, and returns how many live ones it deleted.
func deleteMemberSessionsExcept(tx *storage.Tx, memberID, keep string) (int, error) {
	digests, err := tx.Suffixes(memberSessionsPrefix(memberID))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range digests {
		if d == keep {
			continue
		}
		if ok, err := tx.Has(sessionKey(d)); err != nil {
			return n, err
		} else if ok {
			n++
		}
		if err := tx.Delete(sessionKey(d)); err != nil {
			return n, err
		}
		if err := tx.Delete(memberSessionKey(memberID, d)); err != nil {
			return n, err
		}
	}
	return n, nil
}
