// Package grants holds the records of hearth_oauth's authorization server
// (handlers/oauth): the applications clients register, the authorization
// codes, the access tokens, and each member's grants to applications, over
// the engine-agnostic core in storage (keys under "oauth/" and
// "u/<member>/oauth/"). Its name is the domain's, not handlers/oauth's: a
// grant is what a member gives an application.
//
// A Store is a value holding only the *storage.Store. The caches of
// applications and tokens are kinds declared here (storage.NewCacheKind),
// so each storage.Store holds one of each, whatever value reads it: Of
// may be called anywhere, as often as wanted, without allocating.
package grants

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"

	"github.com/hearthkit/caddy-hearth/storage/members"
)

// OAuth records of the hearth_oauth authorization server: registered
// applications, authorization codes and access tokens. Client secrets, codes
// and tokens are random values kept here only as their storage.Digest.
//
// Keys:
//
//	oauth/app/<client_id>                     App
//	oauth/code/<digest>                       Code (TTL: CodeLifetime)
//	oauth/token/<digest>                      AccessToken
//	oauth/apptoken/<client_id>/<id>           an app token's digest (apptokens.go)
//	oauth/unused/<time>/<client_id>           an app not used yet (vacuum.go)
//
// and the member's index of its grants, for settings, kept by generation
// (revocation.go).

// Prefixes of the secrets handed out, so a leaked value is recognisable.
const (
	ClientSecretPrefix = "hcs_"
	CodePrefix         = "hac_"
	TokenPrefix        = "hat_"
)

// CodeLifetime is how long an authorization code can be exchanged.
const CodeLifetime = 10 * time.Minute

// ErrCodeUsed is returned by ExchangeCode for a code that was already
// exchanged (or consumed by a failed exchange).
var ErrCodeUsed = errors.New("authorization code already used")

// CodeRefusal is ExchangeCode's error for a code that exists but was
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

// clock is the clock of code expiry and of the removal of unused apps
// (tests move it, setNow), nil for time.Now. A package clock: a grants
// Store is a view of a storage.Store (Of) with no room for one; atomic,
// as the sweep reads it on a goroutine of its own.
var clock atomic.Pointer[func() time.Time]

// now is the time by clock.
func now() time.Time {
	if f := clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// App is a registered client application.
type App struct {
	ID           string    `json:"id"`
	ClientID     string    `json:"client_id"`
	SecretDigest string    `json:"secret_digest"`
	Name         string    `json:"name"`
	Website      string    `json:"website,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	Scopes       []string  `json:"scopes"`
	CreatedAt    time.Time `json:"created_at"`
	// Client is set for the clients the operator registers (OpenID
	// Connect, see clients.go); nil for apps registered through
	// /api/v1/apps, which keep the Mastodon behaviour exactly.
	Client *ClientSettings `json:"client,omitempty"`
}

// Code is an authorization code granted by a member to an app.
type Code struct {
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
	// Stamp is the member's security stamp when the code was granted: a
	// code granted before a change of the member's credentials (password,
	// second factor, suspension) is not exchanged.
	Stamp string `json:"stamp,omitempty"`
	// The generations the code was granted in: a code granted before a
	// revocation of the member's access or of the app is not exchanged.
	grantGen
	// OIDC is what an operator client's code carries (nil otherwise).
	OIDC *CodeOIDC `json:"oidc,omitempty"`
}

// AccessToken is an issued bearer token. MemberID is empty for an
// application token (client_credentials grant).
type AccessToken struct {
	ID        string    `json:"id"`
	ClientID  string    `json:"client_id"`
	MemberID  string    `json:"member_id,omitempty"`
	Scopes    []string  `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when an operator client's token stops working (zero:
	// no fixed expiry, as for Mastodon apps).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// The generations the token was issued in (a member's token): it is
	// refused once a revocation moved either on.
	grantGen

	// Refresh is the refresh token issued along with this token, if any;
	// set only on issue, never stored.
	Refresh string `json:"-"`
	// Grant is the sign-in the token was issued from (an operator client's
	// code or refresh token), for its ID token; set only on issue.
	Grant *CodeOIDC `json:"-"`
}

// Allows reports whether the token's scopes cover scope (see ScopesCover).
func (t *AccessToken) Allows(scope string) bool { return ScopesCover(t.Scopes, scope) }

// AllowsAny reports whether the token's scopes cover at least one of scopes.
func (t *AccessToken) AllowsAny(scopes ...string) bool {
	for _, s := range scopes {
		if t.Allows(s) {
			return true
		}
	}
	return false
}

// Scopes is every scope hearth_oauth recognises: the spec's scopes and
// the rest of Mastodon 4.4's list for ordinary (non-admin) apps.
var Scopes = []string{
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
	m := make(map[string]bool, len(Scopes))
	for _, s := range Scopes {
		m[s] = true
	}
	return m
}()

// IsScope reports whether s is a recognised scope.
func IsScope(s string) bool { return knownScopes[s] }

// followCovers is what Mastodon's deprecated follow scope grants.
var followCovers = map[string]bool{
	"read:blocks": true, "write:blocks": true,
	"read:follows": true, "write:follows": true,
	"read:mutes": true, "write:mutes": true,
}

// ScopesCover reports whether granted covers want: a scope covers
// itself, the broad read and write scopes cover their granular read:… and
// write:… scopes, follow covers the relationship scopes (as in Mastodon),
// and a granular scope covers only itself.
func ScopesCover(granted []string, want string) bool {
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

// Store is the OAuth records of one storage.Store.
type Store struct{ st *storage.Store }

// Of returns the OAuth records of st.
func Of(st *storage.Store) Store { return Store{st} }

// The record caches of OAuth: the client on every token request, the
// access token on every API call.
var (
	appCache   = storage.NewCacheKind[App](appKey(""))           // by client_id
	tokenCache = storage.NewCacheKind[AccessToken](tokenKey("")) // by token digest
)

func appKey(clientID string) []byte { return storage.Key("oauth", "app", clientID) }
func codeKey(digest string) []byte  { return storage.Key("oauth", "code", digest) }
func tokenKey(digest string) []byte { return storage.Key("oauth", "token", digest) }

// memberTokenRef is what the member's index keeps of each of its tokens.
type memberTokenRef struct {
	Scopes    []string  `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
}

func init() {
	// A deleted member's tokens are refused at once (their member is
	// gone); their records, as many as the member's index names, and the
	// member's pairs (one per app it granted a code), go after it in
	// batches (deleteGrantsOf). Its place in the sweep's queue goes with
	// it.
	members.OnDeleteData(deleteGrantsOf)
	members.OnDelete(func(tx *storage.Tx, memberID string) error {
		return tx.Delete(sweepKey(memberID))
	})
}

// CreateApp registers an application and returns it with its client
// secret, which is not stored and cannot be shown again. The caller has
// validated the fields. Until it is used, it waits in the queue of apps
// the sweep removes a day after their registration (vacuum.go).
func (s Store) CreateApp(ctx context.Context, name, website string, redirectURIs, scopes []string) (*App, string, error) {
	secret := storage.NewSecret(ClientSecretPrefix, 32)
	app := &App{
		ClientID:     storage.NewSecret("", 32),
		SecretDigest: storage.Digest(secret),
		Name:         name,
		Website:      website,
		RedirectURIs: redirectURIs,
		Scopes:       scopes,
		CreatedAt:    now().UTC(),
	}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := putNewApp(tx, app); err != nil {
			return err
		}
		return tx.Put(unusedAppKey(app), nil, 0)
	})
	if err != nil {
		return nil, "", err
	}
	return app, secret, nil
}

// putNewApp gives app its ID and stores it under its (fresh) client_id.
func putNewApp(tx *storage.Tx, app *App) error {
	var err error
	if app.ID, err = tx.NewID(); err != nil {
		return err
	}
	taken, err := tx.Has(appKey(app.ClientID))
	if err != nil {
		return err
	}
	if taken {
		return storage.ErrConflict
	}
	return tx.PutJSON(appKey(app.ClientID), app, 0)
}

// App returns the application with clientID.
func (s Store) App(ctx context.Context, clientID string) (app *App, err error) {
	if clientID == "" || len(clientID) > 128 {
		return nil, storage.ErrNotFound
	}
	gen := appCache.Of(s.st).Generation()
	if app := appCache.Of(s.st).Get(clientID); app != nil {
		return app, nil
	}
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		app = new(App)
		return tx.GetJSON(appKey(clientID), app)
	})
	if err != nil {
		return nil, err
	}
	appCache.Of(s.st).Add(gen, clientID, app)
	return app, nil
}

// AuthenticateClient returns the application whose client_id and
// client_secret match; the secret is compared in constant time. Any
// mismatch is storage.ErrNotFound.
func (s Store) AuthenticateClient(ctx context.Context, clientID, secret string) (*App, error) {
	app, err := s.App(ctx, clientID)
	if errors.Is(err, storage.ErrNotFound) {
		storage.SecretMatches(secret, storage.Digest("")) // same work as a wrong secret
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if secret == "" || !storage.SecretMatches(secret, app.SecretDigest) {
		return nil, storage.ErrNotFound
	}
	return app, nil
}

// CreateAppToken issues an application token (client_credentials
// grant): no member, the given scopes. It commits asynchronously
// (UpdateAsync): should a power loss take the token, the application gets a
// new one by asking again, as OAuth clients do when a token stops working,
// and nothing else refers to it (it acts for no member). Revocations and
// member tokens wait for the disk. An app keeps its MaxAppTokens newest
// app tokens: this one revokes the oldest past them (apptokens.go).
// storage.ErrNotFound when the app is gone, though its client
// authenticated: the sweep removed it meanwhile (vacuum.go), and a token
// would outlive it.
func (s Store) CreateAppToken(ctx context.Context, clientID string, scopes []string) (tok *AccessToken, secret string, err error) {
	err = s.st.UpdateAsync(ctx, func(tx *storage.Tx) error {
		if ok, err := tx.Has(appKey(clientID)); err != nil || !ok {
			if err == nil {
				err = storage.ErrNotFound
			}
			return err
		}
		tok, secret, err = createToken(tx, clientID, "", grantGen{}, scopes)
		if err != nil {
			return err
		}
		return indexAppToken(tx, tok, storage.Digest(secret))
	})
	return tok, secret, err
}

// createToken issues a token of memberID ("": the app's own) to clientID,
// in the generations g of the member's grant (grantOf).
func createToken(tx *storage.Tx, clientID, memberID string, g grantGen, scopes []string) (*AccessToken, string, error) {
	return createTokenFor(tx, "", clientID, memberID, g, scopes, 0)
}

// createTokenFor is createToken for the token secret ("": a new random
// one) that expires after ttl (0: never); its records go with it.
func createTokenFor(tx *storage.Tx, secret, clientID, memberID string, g grantGen, scopes []string, ttl time.Duration) (*AccessToken, string, error) {
	if secret == "" {
		secret = storage.NewSecret(TokenPrefix, 32)
	}
	d := storage.Digest(secret)
	id, err := tx.NewID()
	if err != nil {
		return nil, "", err
	}
	t := &AccessToken{
		ID:        id,
		ClientID:  clientID,
		MemberID:  memberID,
		Scopes:    scopes,
		CreatedAt: time.Now().UTC().Truncate(time.Second),
		grantGen:  g,
	}
	if ttl > 0 {
		t.ExpiresAt = t.CreatedAt.Add(ttl)
	}
	if err := tx.PutJSON(tokenKey(d), t, ttl); err != nil {
		return nil, "", err
	}
	if memberID != "" {
		ref := memberTokenRef{Scopes: scopes, CreatedAt: t.CreatedAt}
		if err := putRef(tx, memberID, clientID, g, d, ref, ttl); err != nil {
			return nil, "", err
		}
	}
	return t, secret, nil
}

func deleteToken(tx *storage.Tx, digest string) error {
	var t AccessToken
	err := tx.GetJSON(tokenKey(digest), &t)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.Delete(tokenKey(digest)); err != nil {
		return err
	}
	if t.MemberID != "" {
		return deleteRef(tx, t.MemberID, t.ClientID, t.grantGen, digest)
	}
	return unindexAppToken(tx, &t)
}

// Token authenticates a bearer token issued by hearth_oauth. It
// returns the token (with its scopes, see Allows) and its member, or a nil
// member for an application token (client_credentials). Unknown or revoked
// tokens (a revocation of the member's access or of the app moved the
// generations the token carries on) and tokens of deleted members are
// storage.ErrNotFound; a suspended member's
// tokens are members.ErrSuspended. Other services use it to accept OAuth tokens.
func (s Store) Token(ctx context.Context, token string) (*AccessToken, *members.Member, error) {
	if token == "" || len(token) > 256 {
		return nil, nil, storage.ErrNotFound
	}
	// The token, its member and the member's grant to the app come from
	// the record caches when they are there: every API request reads them.
	d := storage.Digest(token)
	gens := cacheGens{tokenCache.Of(s.st).Generation(), members.Cache.Of(s.st).Generation(), pairCache.Of(s.st).Generation()}
	t := tokenCache.Of(s.st).Get(d)
	var m *members.Member
	var p *pairState
	if t != nil && t.MemberID != "" {
		m = members.Cache.Of(s.st).Get(t.MemberID)
		p = pairCache.Of(s.st).Get(pairID(t.MemberID, t.ClientID))
	}
	if t == nil || t.MemberID != "" && (m == nil || p == nil) {
		var err error
		if t, m, p, err = s.readToken(ctx, d, gens, t, m, p); err != nil {
			return nil, nil, err
		}
	}
	if !t.ExpiresAt.IsZero() && !now().Before(t.ExpiresAt) {
		return nil, nil, storage.ErrNotFound
	}
	if m != nil && !t.liveIn(m, *p) {
		return nil, nil, storage.ErrNotFound
	}
	if m != nil && m.Suspended {
		return nil, nil, members.ErrSuspended
	}
	return t, m, nil
}

// IssueMany issues n access tokens of memberID to clientID with scopes, as
// n code exchanges would, a few hundred a transaction, and returns them:
// for the tests and benchmarks that need a member holding many tokens.
func (s Store) IssueMany(ctx context.Context, clientID, memberID string, scopes []string, n int) ([]string, error) {
	out := make([]string, 0, n)
	for len(out) < n {
		k := min(n-len(out), 500)
		var batch []string
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			batch = batch[:0]
			m, err := members.ByID(tx, memberID)
			if err != nil {
				return err
			}
			g, err := grantOf(tx, m, clientID)
			if err != nil {
				return err
			}
			for range k {
				_, secret, err := createToken(tx, clientID, memberID, g, scopes)
				if err != nil {
					return err
				}
				batch = append(batch, secret)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, batch...)
	}
	return out, nil
}

// cacheGens are the generations of the caches Token reads, taken before
// its read transaction.
type cacheGens struct{ token, member, pair uint64 }

// readToken reads in the store what Token did not find in the caches (t,
// m or p nil: the token, its member, the member's grant to the app) and
// adds it to them. Apart from Token, so that what its transaction's
// function captures is allocated only when the store is read.
func (s Store) readToken(ctx context.Context, d string, gens cacheGens, t *AccessToken, m *members.Member, p *pairState) (*AccessToken, *members.Member, *pairState, error) {
	readToken, readMember, readGrant := t == nil, false, false
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		if readToken {
			t = new(AccessToken)
			if err := tx.GetJSON(tokenKey(d), t); err != nil {
				return err
			}
		}
		if t.MemberID == "" {
			return nil
		}
		var err error
		if m == nil {
			if m, readMember, err = members.Cached(s.st, tx, t.MemberID); err != nil {
				return err
			}
		}
		if p == nil {
			p, readGrant, err = cachedPair(s.st, tx, t.MemberID, t.ClientID)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if readToken {
		tokenCache.Of(s.st).Add(gens.token, d, t)
	}
	if readMember {
		members.Cache.Of(s.st).Add(gens.member, m.ID, m)
	}
	if readGrant {
		pairCache.Of(s.st).Add(gens.pair, pairID(t.MemberID, t.ClientID), p)
	}
	return t, m, p, nil
}

// Cached reports whether token's record is in this node's cache (a later
// Token comes from it): for the tests of the caches across nodes.
func (s Store) Cached(token string) bool {
	return tokenCache.Of(s.st).Get(storage.Digest(token)) != nil
}

// RevokeToken revokes token if it was issued to clientID. Unknown,
// already revoked and other clients' tokens are left alone without error.
func (s Store) RevokeToken(ctx context.Context, clientID, token string) error {
	if token == "" || len(token) > 256 {
		return nil
	}
	d := storage.Digest(token)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var t AccessToken
		err := tx.GetJSON(tokenKey(d), &t)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if t.ClientID != clientID {
			return nil
		}
		return deleteToken(tx, d)
	})
}

// AuthorizedApp is an application a member has live tokens for.
type AuthorizedApp struct {
	App *App
	// Scopes is the union of the scopes of the member's tokens for App.
	Scopes []string
	// AuthorizedAt is when the first live token was issued.
	AuthorizedAt time.Time
}

// AuthorizedApps lists the applications memberID has live tokens for,
// most recently authorized first.
func (s Store) AuthorizedApps(ctx context.Context, memberID string) ([]AuthorizedApp, error) {
	var out []AuthorizedApp
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		out = out[:0]
		m, err := members.ByID(tx, memberID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		byClient := map[string]int{}
		return liveRefs(tx, m, "", func(clientID, _ string, ref memberTokenRef) (int, error) {
			idx, ok := byClient[clientID]
			if !ok {
				app := new(App)
				if err := tx.GetJSON(appKey(clientID), app); err != nil {
					if errors.Is(err, storage.ErrNotFound) {
						return nextApp, nil
					}
					return stopRefs, err
				}
				out = append(out, AuthorizedApp{App: app, AuthorizedAt: ref.CreatedAt})
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
			return nextRef, nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		// Token keys are ordered by digest, which is random: list the
		// scopes in the canonical order instead.
		slices.SortFunc(out[i].Scopes, func(a, b string) int {
			return slices.Index(Scopes, a) - slices.Index(Scopes, b)
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AuthorizedAt.After(out[j].AuthorizedAt) })
	return out, nil
}

// maxGrantScan bounds Covers: a member with more live tokens for
// one app than this is asked to consent again rather than scanned further.
const maxGrantScan = 1000

// Covers reports whether memberID holds a live access token for
// clientID whose scopes cover every one of scopes: Doorkeeper's matching
// token (lib/doorkeeper/models/access_token_mixin.rb matching_token_for,
// not revoked), with which the authorize endpoint skips the consent page.
func (s Store) Covers(ctx context.Context, memberID, clientID string, scopes []string) (bool, error) {
	if memberID == "" || clientID == "" || strings.Contains(clientID, "/") {
		return false, nil
	}
	found := false
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		found = false
		m, err := members.ByID(tx, memberID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		n := 0
		return liveRefs(tx, m, clientID, func(_, _ string, ref memberTokenRef) (int, error) {
			found = true
			for _, sc := range scopes {
				if !ScopesCover(ref.Scopes, sc) {
					found = false
					break
				}
			}
			if n++; found || n >= maxGrantScan {
				return stopRefs, nil
			}
			return nextRef, nil
		})
	})
	if err != nil {
		return false, err
	}
	return found, nil
}
