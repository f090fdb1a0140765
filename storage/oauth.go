package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// OAuth records of the hearth_oauth authorization server: registered
// applications, authorization codes and access tokens. Client secrets, codes
// and tokens are random values kept here only as their Digest.
//
// Keys:
//
//	oauth/app/<client_id>                     OAuthApp
//	oauth/code/<digest>                       OAuthCode (TTL: OAuthCodeLifetime)
//	oauth/token/<digest>                      OAuthAccessToken
//	u/<member>/oauth/tok/<client_id>/<digest> memberTokenRef (the member's grants, for settings)
//	u/<member>/oauth/rev/<client_id>          time of the member's last revocation of the app
//	                                          (TTL: OAuthCodeLifetime; codes issued before it are void)

// Prefixes of the secrets handed out, so a leaked value is recognisable.
const (
	OAuthClientSecretPrefix = "hcs_"
	OAuthCodePrefix         = "hac_"
	OAuthTokenPrefix        = "hat_"
)

// OAuthCodeLifetime is how long an authorization code can be exchanged.
const OAuthCodeLifetime = 10 * time.Minute

// ErrCodeUsed is returned by ExchangeOAuthCode for a code that was already
// exchanged (or consumed by a failed exchange).
var ErrCodeUsed = errors.New("authorization code already used")

// CodeRefusal is ExchangeOAuthCode's error for a code that exists but was
// not exchanged: check refused it, or it had been used before (Err is
// check's error or ErrCodeUsed). MemberID is the member who granted the
// code, against whom failed exchanges count (the code names its member; a
// guess at a token or a code that does not exist names nobody).
type CodeRefusal struct {
	MemberID string
	Err      error
	// First is whether this is the code's first refusal: a failed check
	// (which burns the code), or the first use after a successful exchange
	// (which revokes the token issued). Later uses of a burnt code change
	// nothing, so a limit on failures counts each code at most twice.
	First bool
}

func (e *CodeRefusal) Error() string { return e.Err.Error() }
func (e *CodeRefusal) Unwrap() error { return e.Err }

// oauthNow is the clock of code expiry (tests move it).
var oauthNow = time.Now

// OAuthApp is a registered client application.
type OAuthApp struct {
	ID           string    `json:"id"`
	ClientID     string    `json:"client_id"`
	SecretDigest string    `json:"secret_digest"`
	Name         string    `json:"name"`
	Website      string    `json:"website,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	Scopes       []string  `json:"scopes"`
	CreatedAt    time.Time `json:"created_at"`
}

// OAuthCode is an authorization code granted by a member to an app.
type OAuthCode struct {
	ClientID      string    `json:"client_id"`
	MemberID      string    `json:"member_id"`
	RedirectURI   string    `json:"redirect_uri"`
	Scopes        []string  `json:"scopes"`
	CodeChallenge string    `json:"code_challenge,omitempty"` // S256 only
	CreatedAt     time.Time `json:"created_at"`
	// Used is set once the code was exchanged or consumed by a failed
	// exchange; TokenDigest names the token issued from it, if any, so a
	// replay can revoke it.
	Used        bool   `json:"used,omitempty"`
	TokenDigest string `json:"token_digest,omitempty"`
}

// OAuthAccessToken is an issued bearer token. MemberID is empty for an
// application token (client_credentials grant).
type OAuthAccessToken struct {
	ID        string    `json:"id"`
	ClientID  string    `json:"client_id"`
	MemberID  string    `json:"member_id,omitempty"`
	Scopes    []string  `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
}

// Allows reports whether the token's scopes cover scope (see OAuthScopesCover).
func (t *OAuthAccessToken) Allows(scope string) bool { return OAuthScopesCover(t.Scopes, scope) }

// AllowsAny reports whether the token's scopes cover at least one of scopes.
func (t *OAuthAccessToken) AllowsAny(scopes ...string) bool {
	for _, s := range scopes {
		if t.Allows(s) {
			return true
		}
	}
	return false
}

// OAuthScopes is every scope hearth_oauth recognises: the spec's scopes and
// the rest of Mastodon 4.4's list for ordinary (non-admin) apps.
var OAuthScopes = []string{
	"profile",
	"read",
	"read:accounts", "read:blocks", "read:bookmarks", "read:favourites", "read:filters",
	"read:follows", "read:lists", "read:mutes", "read:notifications", "read:search", "read:statuses",
	"write",
	"write:accounts", "write:blocks", "write:bookmarks", "write:conversations", "write:favourites",
	"write:filters", "write:follows", "write:lists", "write:media", "write:mutes",
	"write:notifications", "write:reports", "write:statuses",
	"follow",
	"push",
}

var knownScopes = func() map[string]bool {
	m := make(map[string]bool, len(OAuthScopes))
	for _, s := range OAuthScopes {
		m[s] = true
	}
	return m
}()

// IsOAuthScope reports whether s is a recognised scope.
func IsOAuthScope(s string) bool { return knownScopes[s] }

// followCovers is what Mastodon's deprecated follow scope grants.
var followCovers = map[string]bool{
	"read:blocks": true, "write:blocks": true,
	"read:follows": true, "write:follows": true,
	"read:mutes": true, "write:mutes": true,
}

// OAuthScopesCover reports whether granted covers want: a scope covers
// itself, the broad read and write scopes cover their granular read:… and
// write:… scopes, follow covers the relationship scopes (as in Mastodon),
// and a granular scope covers only itself.
func OAuthScopesCover(granted []string, want string) bool {
	for _, g := range granted {
		if g == want {
			return true
		}
		switch g {
		case "read", "write":
			if strings.HasPrefix(want, g+":") && knownScopes[want] {
				return true
			}
		case "follow":
			if followCovers[want] {
				return true
			}
		}
	}
	return false
}

// The record caches of OAuth: the client on every token request, the
// access token on every API call.
var (
	appCache        = NewCacheKind[OAuthApp](oauthAppKey(""))           // by client_id
	oauthTokenCache = NewCacheKind[OAuthAccessToken](oauthTokenKey("")) // by token digest
)

func oauthAppKey(clientID string) []byte       { return key("oauth", "app", clientID) }
func oauthCodeKey(digest string) []byte        { return key("oauth", "code", digest) }
func oauthTokenKey(digest string) []byte       { return key("oauth", "token", digest) }
func memberOAuthPrefix(memberID string) []byte { return key("u", memberID, "oauth", "tok", "") }
func memberOAuthAppPrefix(memberID, clientID string) []byte {
	return key("u", memberID, "oauth", "tok", clientID, "")
}
func memberOAuthTokenKey(memberID, clientID, digest string) []byte {
	return key("u", memberID, "oauth", "tok", clientID, digest)
}
func memberOAuthRevokedKey(memberID, clientID string) []byte {
	return key("u", memberID, "oauth", "rev", clientID)
}

// memberTokenRef is what the member's index keeps of each of its tokens.
type memberTokenRef struct {
	Scopes    []string  `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
}

func init() {
	memberCleanups = append(memberCleanups, func(tx *Tx, memberID string) error {
		prefix := memberOAuthPrefix(memberID)
		var digests []string
		err := tx.scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
			rest := string(k[len(prefix):])
			if i := strings.LastIndexByte(rest, '/'); i >= 0 {
				digests = append(digests, rest[i+1:])
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, d := range digests {
			if err := tx.delete(oauthTokenKey(d)); err != nil {
				return err
			}
		}
		return nil
	})
}

// CreateOAuthApp registers an application and returns it with its client
// secret, which is not stored and cannot be shown again. The caller has
// validated the fields.
func (s *Store) CreateOAuthApp(ctx context.Context, name, website string, redirectURIs, scopes []string) (*OAuthApp, string, error) {
	secret := NewSecret(OAuthClientSecretPrefix, 32)
	app := &OAuthApp{
		ClientID:     NewSecret("", 32),
		SecretDigest: Digest(secret),
		Name:         name,
		Website:      website,
		RedirectURIs: redirectURIs,
		Scopes:       scopes,
		CreatedAt:    time.Now().UTC(),
	}
	err := s.Update(ctx, func(tx *Tx) error {
		var err error
		if app.ID, err = tx.newID(); err != nil {
			return err
		}
		taken, err := tx.has(oauthAppKey(app.ClientID))
		if err != nil {
			return err
		}
		if taken {
			return ErrConflict
		}
		return tx.putJSON(oauthAppKey(app.ClientID), app, 0)
	})
	if err != nil {
		return nil, "", err
	}
	return app, secret, nil
}

// OAuthApp returns the application with clientID.
func (s *Store) OAuthApp(ctx context.Context, clientID string) (app *OAuthApp, err error) {
	if clientID == "" || len(clientID) > 128 {
		return nil, ErrNotFound
	}
	gen := appCache.Of(s).Generation()
	if app := appCache.Of(s).Get(clientID); app != nil {
		return app, nil
	}
	err = s.View(ctx, func(tx *Tx) error {
		app = new(OAuthApp)
		return tx.getJSON(oauthAppKey(clientID), app)
	})
	if err != nil {
		return nil, err
	}
	appCache.Of(s).Add(gen, clientID, app)
	return app, nil
}

// AuthenticateOAuthClient returns the application whose client_id and
// client_secret match; the secret is compared in constant time. Any
// mismatch is ErrNotFound.
func (s *Store) AuthenticateOAuthClient(ctx context.Context, clientID, secret string) (*OAuthApp, error) {
	app, err := s.OAuthApp(ctx, clientID)
	if errors.Is(err, ErrNotFound) {
		SecretMatches(secret, Digest("")) // same work as a wrong secret
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if secret == "" || !SecretMatches(secret, app.SecretDigest) {
		return nil, ErrNotFound
	}
	return app, nil
}

// CreateOAuthCode records an authorization code that memberID granted to
// the app for redirectURI and scopes, and returns the code. It lives for
// OAuthCodeLifetime.
func (s *Store) CreateOAuthCode(ctx context.Context, clientID, memberID, redirectURI string, scopes []string, codeChallenge string) (string, error) {
	code := NewSecret(OAuthCodePrefix, 32)
	rec := OAuthCode{
		ClientID:      clientID,
		MemberID:      memberID,
		RedirectURI:   redirectURI,
		Scopes:        scopes,
		CodeChallenge: codeChallenge,
		CreatedAt:     time.Now().UTC(),
	}
	err := s.Update(ctx, func(tx *Tx) error {
		if _, err := tx.MemberByID(memberID); err != nil {
			return err
		}
		return tx.putJSON(oauthCodeKey(Digest(code)), rec, OAuthCodeLifetime)
	})
	if err != nil {
		return "", err
	}
	return code, nil
}

// CodeCheck decides, inside ExchangeOAuthCode's transaction, whether the
// presented code may be exchanged. A non-nil error refuses the exchange;
// the code is consumed either way.
type CodeCheck func(c *OAuthCode) error

// ExchangeOAuthCode exchanges an authorization code for an access token of
// its member, once. The code is looked up by its digest; check validates
// client, redirect URI and PKCE verifier against the record.
//
// It returns ErrNotFound for an unknown or expired code, ErrCodeUsed for a
// code that was used before (and then revokes the token issued from it),
// ErrSuspended or ErrNotFound when the member can no longer be served, and
// check's error; ErrCodeUsed and check's error come as a *CodeRefusal
// naming the code's member. Concurrent exchanges of one code issue at most one token:
// the transaction that consumes it fails on a conflict instead of retrying;
// the code is then read again, and if it is now used the loser is treated
// as a second use. Otherwise the conflict was with another transaction (on
// PostgreSQL, SSI's page-granular predicate locks can fail the exchanges of
// two different codes of one member and app, ../shared/design/scale-out.md
// §6.4) and the exchange runs again, up to maxCodeExchangeAttempts times.
func (s *Store) ExchangeOAuthCode(ctx context.Context, code string, check CodeCheck) (*OAuthAccessToken, string, error) {
	if code == "" || len(code) > 256 {
		return nil, "", ErrNotFound
	}
	ck := oauthCodeKey(Digest(code))
	var tok *OAuthAccessToken
	var secret string
	var checkErr error
	var memberID string
	exchange := func(tx *Tx) error {
		tok, secret, checkErr = nil, "", nil
		var c OAuthCode
		if err := tx.getJSON(ck, &c); err != nil {
			return err
		}
		memberID = c.MemberID
		if c.Used {
			return ErrCodeUsed
		}
		age := oauthNow().Sub(c.CreatedAt)
		if age > OAuthCodeLifetime {
			return ErrNotFound
		}
		ttl := max(OAuthCodeLifetime-age, 0) + time.Second
		// A code the member granted before revoking the app in settings
		// must not bring the app back.
		var revokedAt time.Time
		err := tx.getJSON(memberOAuthRevokedKey(c.MemberID, c.ClientID), &revokedAt)
		if err == nil && !c.CreatedAt.After(revokedAt) {
			return ErrNotFound
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		c.Used = true
		if err := check(&c); err != nil {
			// A failed exchange consumes the code.
			checkErr = err
			return tx.putJSON(ck, c, ttl)
		}
		m, err := tx.MemberByID(c.MemberID)
		if err != nil {
			return err
		}
		if m.Suspended {
			return ErrSuspended
		}
		tok, secret, err = tx.createOAuthToken(c.ClientID, c.MemberID, c.Scopes)
		if err != nil {
			return err
		}
		c.TokenDigest = Digest(secret)
		return tx.putJSON(ck, c, ttl)
	}
	var err error
	backoff := retryBackoffMin
	for attempt := 1; ; attempt++ {
		err = s.UpdateOnce(ctx, exchange)
		if !errors.Is(err, ErrConflict) {
			break
		}
		used, rerr := s.codeUsed(ctx, ck)
		if rerr != nil {
			return nil, "", rerr
		}
		if used {
			break // a concurrent use of this code won
		}
		if attempt == maxCodeExchangeAttempts {
			return nil, "", fmt.Errorf("exchange an authorization code: %d attempts conflicted with other transactions: %w", attempt, kv.ErrConflict)
		}
		time.Sleep(backoff/2 + rand.N(backoff/2+1))
		backoff = min(2*backoff, retryBackoffMax)
	}
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrCodeUsed) {
		// A second (or concurrent) use: the code is compromised, so the
		// token issued from it goes too (RFC 6749 section 4.1.2).
		revoked, rerr := s.revokeTokenOfCode(ctx, ck)
		if rerr != nil {
			return nil, "", rerr
		}
		return nil, "", &CodeRefusal{MemberID: memberID, Err: ErrCodeUsed, First: revoked}
	}
	if err != nil {
		return nil, "", err
	}
	if checkErr != nil {
		return nil, "", &CodeRefusal{MemberID: memberID, Err: checkErr, First: true}
	}
	return tok, secret, nil
}

// maxCodeExchangeAttempts bounds the runs of one exchange that conflict
// with other transactions without the code being used.
const maxCodeExchangeAttempts = 10

// codeUsed reports whether the code stored at ck is marked used (false
// when it is absent or expired).
func (s *Store) codeUsed(ctx context.Context, ck []byte) (bool, error) {
	var c OAuthCode
	err := s.View(ctx, func(tx *Tx) error { return tx.getJSON(ck, &c) })
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return c.Used, err
}

// revokeTokenOfCode revokes the token issued from the code stored at ck,
// if it has one, and forgets it: revoked says whether there was one.
func (s *Store) revokeTokenOfCode(ctx context.Context, ck []byte) (revoked bool, err error) {
	err = s.Update(ctx, func(tx *Tx) error {
		revoked = false
		var c OAuthCode
		err := tx.getJSON(ck, &c)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.TokenDigest == "" {
			return nil
		}
		if err := tx.deleteOAuthToken(c.TokenDigest); err != nil {
			return err
		}
		revoked, c.TokenDigest = true, ""
		ttl := max(OAuthCodeLifetime-oauthNow().Sub(c.CreatedAt), 0) + time.Second
		return tx.putJSON(ck, c, ttl)
	})
	return revoked, err
}

// CreateOAuthAppToken issues an application token (client_credentials
// grant): no member, the given scopes. It commits asynchronously
// (UpdateAsync): should a power loss take the token, the application gets a
// new one by asking again, as OAuth clients do when a token stops working,
// and nothing else refers to it (it acts for no member). Revocations and
// member tokens wait for the disk.
func (s *Store) CreateOAuthAppToken(ctx context.Context, clientID string, scopes []string) (tok *OAuthAccessToken, secret string, err error) {
	err = s.UpdateAsync(ctx, func(tx *Tx) error {
		tok, secret, err = tx.createOAuthToken(clientID, "", scopes)
		return err
	})
	return tok, secret, err
}

func (tx *Tx) createOAuthToken(clientID, memberID string, scopes []string) (*OAuthAccessToken, string, error) {
	secret := NewSecret(OAuthTokenPrefix, 32)
	d := Digest(secret)
	id, err := tx.newID()
	if err != nil {
		return nil, "", err
	}
	t := &OAuthAccessToken{
		ID:        id,
		ClientID:  clientID,
		MemberID:  memberID,
		Scopes:    scopes,
		CreatedAt: time.Now().UTC().Truncate(time.Second),
	}
	if err := tx.putJSON(oauthTokenKey(d), t, 0); err != nil {
		return nil, "", err
	}
	if memberID != "" {
		ref := memberTokenRef{Scopes: scopes, CreatedAt: t.CreatedAt}
		if err := tx.putJSON(memberOAuthTokenKey(memberID, clientID, d), ref, 0); err != nil {
			return nil, "", err
		}
	}
	return t, secret, nil
}

func (tx *Tx) deleteOAuthToken(digest string) error {
	var t OAuthAccessToken
	err := tx.getJSON(oauthTokenKey(digest), &t)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.delete(oauthTokenKey(digest)); err != nil {
		return err
	}
	if t.MemberID != "" {
		return tx.delete(memberOAuthTokenKey(t.MemberID, t.ClientID, digest))
	}
	return nil
}

// OAuthToken authenticates a bearer token issued by hearth_oauth. It
// returns the token (with its scopes, see Allows) and its member, or a nil
// member for an application token (client_credentials). Unknown or revoked
// tokens and tokens of deleted members are ErrNotFound; a suspended member's
// tokens are ErrSuspended. Other services use it to accept OAuth tokens.
func (s *Store) OAuthToken(ctx context.Context, token string) (*OAuthAccessToken, *Member, error) {
	if token == "" || len(token) > 256 {
		return nil, nil, ErrNotFound
	}
	// The token and its member come from the record caches when they are
	// there: every API request reads them.
	d := Digest(token)
	tgen, mgen := oauthTokenCache.Of(s).Generation(), memberCache.Of(s).Generation()
	t := oauthTokenCache.Of(s).Get(d)
	var m *Member
	if t != nil && t.MemberID != "" {
		m = memberCache.Of(s).Get(t.MemberID)
	}
	readToken, readMember := t == nil, false
	if readToken || t.MemberID != "" && m == nil {
		err := s.View(ctx, func(tx *Tx) error {
			if readToken {
				t = new(OAuthAccessToken)
				if err := tx.getJSON(oauthTokenKey(d), t); err != nil {
					return err
				}
			}
			if t.MemberID == "" || m != nil {
				return nil
			}
			var err error
			m, readMember, err = s.cachedMember(tx, t.MemberID)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if readToken {
		oauthTokenCache.Of(s).Add(tgen, d, t)
	}
	if readMember {
		memberCache.Of(s).Add(mgen, m.ID, m)
	}
	if m != nil && m.Suspended {
		return nil, nil, ErrSuspended
	}
	return t, m, nil
}

// RevokeOAuthToken revokes token if it was issued to clientID. Unknown,
// already revoked and other clients' tokens are left alone without error.
func (s *Store) RevokeOAuthToken(ctx context.Context, clientID, token string) error {
	if token == "" || len(token) > 256 {
		return nil
	}
	d := Digest(token)
	return s.Update(ctx, func(tx *Tx) error {
		var t OAuthAccessToken
		err := tx.getJSON(oauthTokenKey(d), &t)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if t.ClientID != clientID {
			return nil
		}
		return tx.deleteOAuthToken(d)
	})
}

// AuthorizedOAuthApp is an application a member has live tokens for.
type AuthorizedOAuthApp struct {
	App *OAuthApp
	// Scopes is the union of the scopes of the member's tokens for App.
	Scopes []string
	// AuthorizedAt is when the first live token was issued.
	AuthorizedAt time.Time
}

// AuthorizedOAuthApps lists the applications memberID has live tokens for,
// most recently authorized first.
func (s *Store) AuthorizedOAuthApps(ctx context.Context, memberID string) ([]AuthorizedOAuthApp, error) {
	var out []AuthorizedOAuthApp
	err := s.View(ctx, func(tx *Tx) error {
		prefix := memberOAuthPrefix(memberID)
		byClient := map[string]int{}
		err := tx.scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			rest := string(k[len(prefix):])
			i := strings.LastIndexByte(rest, '/')
			if i < 0 {
				return true, nil
			}
			clientID := rest[:i]
			var ref memberTokenRef
			if err := unmarshal(v, &ref); err != nil {
				return false, err
			}
			idx, ok := byClient[clientID]
			if !ok {
				app := new(OAuthApp)
				if err := tx.getJSON(oauthAppKey(clientID), app); err != nil {
					if errors.Is(err, ErrNotFound) {
						return true, nil
					}
					return false, err
				}
				out = append(out, AuthorizedOAuthApp{App: app, AuthorizedAt: ref.CreatedAt})
				idx = len(out) - 1
				byClient[clientID] = idx
			}
			a := &out[idx]
			if ref.CreatedAt.Before(a.AuthorizedAt) {
				a.AuthorizedAt = ref.CreatedAt
			}
			for _, sc := range ref.Scopes {
				if !slices.Contains(a.Scopes, sc) {
					a.Scopes = append(a.Scopes, sc)
				}
			}
			return true, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		// Token keys are ordered by digest, which is random: list the
		// scopes in the canonical order instead.
		slices.SortFunc(out[i].Scopes, func(a, b string) int {
			return slices.Index(OAuthScopes, a) - slices.Index(OAuthScopes, b)
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AuthorizedAt.After(out[j].AuthorizedAt) })
	return out, nil
}

// maxGrantScan bounds OAuthGrantCovers: a member with more live tokens for
// one app than this is asked to consent again rather than scanned further.
const maxGrantScan = 1000

// OAuthGrantCovers reports whether memberID holds a live access token for
// clientID whose scopes cover every one of scopes: Doorkeeper's matching
// token (lib/doorkeeper/models/access_token_mixin.rb matching_token_for,
// not revoked), with which the authorize endpoint skips the consent page.
func (s *Store) OAuthGrantCovers(ctx context.Context, memberID, clientID string, scopes []string) (bool, error) {
	if memberID == "" || clientID == "" || strings.Contains(clientID, "/") {
		return false, nil
	}
	found := false
	err := s.View(ctx, func(tx *Tx) error {
		n := 0
		return tx.scan(memberOAuthAppPrefix(memberID, clientID), nil, false, false, func(_, v []byte) (bool, error) {
			var ref memberTokenRef
			if err := unmarshal(v, &ref); err != nil {
				return false, err
			}
			found = true
			for _, sc := range scopes {
				if !OAuthScopesCover(ref.Scopes, sc) {
					found = false
					break
				}
			}
			n++
			return !found && n < maxGrantScan, nil
		})
	})
	if err != nil {
		return false, err
	}
	return found, nil
}

// RevokeOAuthAppForMember revokes every token memberID has given clientID,
// and the authorization codes not yet exchanged.
func (s *Store) RevokeOAuthAppForMember(ctx context.Context, memberID, clientID string) error {
	if clientID == "" || strings.Contains(clientID, "/") {
		return nil
	}
	return s.Update(ctx, func(tx *Tx) error {
		// Codes are found by their digest only; the revocation time voids
		// every code of the pair issued before it, for as long as one lives.
		if err := tx.putJSON(memberOAuthRevokedKey(memberID, clientID), time.Now().UTC(), OAuthCodeLifetime+time.Second); err != nil {
			return err
		}
		digests, err := tx.suffixes(memberOAuthAppPrefix(memberID, clientID))
		if err != nil {
			return err
		}
		for _, d := range digests {
			if err := tx.delete(oauthTokenKey(d)); err != nil {
				return err
			}
			if err := tx.delete(memberOAuthTokenKey(memberID, clientID, d)); err != nil {
				return err
			}
		}
		return nil
	})
}
