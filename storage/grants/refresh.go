package grants

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// What an operator client's code carries, and the refresh tokens issued
// from it (offline_access). A refresh token belongs to a family: every
// token a refresh hands out replaces the one presented, and presenting a
// replaced token again (a copy that leaked, or the client's own retry
// after the answer was lost) ends the whole family, access tokens
// included (OAuth 2.0 Security BCP, RFC 9700 section 4.14.2).
//
// Keys:
//
//	oauth/refresh/<digest>                     RefreshToken (TTL: the refresh lifetime)
//	u/<member>/oauth/fam/<client_id>/<family>  family (TTL: the refresh lifetime)
//
// and the ref of the live refresh token in the member's index of its
// grants (revocation.go), so the grant shows (and is revoked) in settings.

// RefreshPrefix starts every refresh token.
const RefreshPrefix = "hrf_"

// ErrRefreshReused is Refresh's error for a refresh token that was
// replaced before: its family is revoked.
var ErrRefreshReused = errors.New("refresh token used twice; its grant is revoked")

// ErrScopeNotGranted is Refresh's error for a scope the refresh token's
// grant does not hold.
var ErrScopeNotGranted = errors.New("scope not granted to this refresh token")

// CodeOIDC is what an operator client's authorization code carries for
// the tokens issued from it.
type CodeOIDC struct {
	Nonce    string    `json:"nonce,omitempty"`
	AuthTime time.Time `json:"auth_time"`
	AMR      []string  `json:"amr,omitempty"`
	// AccessTTL is the access token's lifetime; RefreshTTL the refresh
	// token's (0: none is issued, also without offline_access).
	AccessTTL  time.Duration `json:"access_ttl"`
	RefreshTTL time.Duration `json:"refresh_ttl,omitempty"`
	// Family is the refresh family issued from the code, set on exchange,
	// so that a replayed code ends it.
	Family string `json:"family,omitempty"`
	// IDToken is the ID token signed when the code was issued, which its
	// exchange returns (nil: the exchange signs one, if openid asks for
	// it). Seed fixes the access token the exchange issues
	// (accessTokenFor), whose hash the ID token carries. Both leave the
	// record when the code is used.
	IDToken *PreparedIDToken `json:"id_token,omitempty"`
	Seed    string           `json:"seed,omitempty"`
}

// PreparedIDToken is an ID token signed ahead of its code's exchange.
type PreparedIDToken struct {
	JWT string `json:"jwt"`
	// Issuer and Expires are its iss and exp, so that the exchange can
	// tell whether it still fits without parsing it.
	Issuer  string    `json:"iss"`
	Expires time.Time `json:"exp"`
}

// IDTokenSigner signs the ID token of a code being issued, for the access
// token its exchange will issue.
type IDTokenSigner func(accessToken string) (*PreparedIDToken, error)

// accessTokenFor is the access token the exchange of code issues when
// its ID token was signed ahead: an HMAC-SHA256 keyed by the code, of a
// label and the random seed kept in the code's record. Computing it takes
// both the code, which the store keeps only as its digest, and the record,
// which the client never sees: a code intercepted on its way to the client
// gives nobody the token that the client's exchange will get, and a copy
// of the store gives no token either.
func accessTokenFor(code, seed string) string {
	mac := hmac.New(sha256.New, []byte(code))
	mac.Write([]byte("hearth access token\x00" + seed))
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// forgetPrepared drops from c what only its exchange needed (the ID token
// signed ahead, the access token's seed), before c is stored used.
func (c *Code) forgetPrepared() {
	if c.OIDC == nil || c.OIDC.IDToken == nil && c.OIDC.Seed == "" {
		return
	}
	o := *c.OIDC // a copy: the token issued keeps the original as its Grant
	o.IDToken, o.Seed = nil, ""
	c.OIDC = &o
}

// RefreshToken is a refresh token's record.
type RefreshToken struct {
	ClientID   string        `json:"client_id"`
	MemberID   string        `json:"member_id"`
	Family     string        `json:"family"`
	Scopes     []string      `json:"scopes"`
	AuthTime   time.Time     `json:"auth_time"`
	AMR        []string      `json:"amr,omitempty"`
	AccessTTL  time.Duration `json:"access_ttl"`
	RefreshTTL time.Duration `json:"refresh_ttl"`
	CreatedAt  time.Time     `json:"created_at"`
	ExpiresAt  time.Time     `json:"expires_at"`
	// Stamp is the member's security stamp when the grant was made: a
	// change of the member's credentials ends its refresh tokens too.
	Stamp string `json:"stamp,omitempty"`
	// Used is set once the token was exchanged for a new one.
	Used bool `json:"used,omitempty"`
	// The generations the grant was made in: a revocation of the member's
	// access or of the app ends the token.
	grantGen
}

// family is the live state of one chain of refresh tokens.
type family struct {
	// Current is the digest of the refresh token that may be used next.
	Current string `json:"current"`
	// Access are the digests of the family's access tokens that may still
	// live (the last maxFamilyAccess), revoked with the family.
	Access []string `json:"access"`
	// The generations of the family's grant; the sweep deletes a family
	// whose grant was revoked.
	grantGen
}

const maxFamilyAccess = 8

func refreshKey(digest string) []byte { return storage.Key("oauth", "refresh", digest) }
func familyKey(memberID, clientID, id string) []byte {
	return storage.Key("u", memberID, "oauth", "fam", clientID, id)
}

// issueForCode issues the access token for code, exchanged: an
// operator client's expires, is the one its ID token was signed for (if
// it was signed ahead), and, with offline_access and a refresh lifetime,
// comes with the first refresh token of a new family.
func issueForCode(tx *storage.Tx, c *Code, code string) (*AccessToken, string, error) {
	o := c.OIDC
	if o == nil {
		return createToken(tx, c.ClientID, c.MemberID, c.grantGen, c.Scopes)
	}
	secret := ""
	if o.Seed != "" {
		secret = accessTokenFor(code, o.Seed)
	}
	tok, secret, err := createTokenFor(tx, secret, c.ClientID, c.MemberID, c.grantGen, c.Scopes, o.AccessTTL)
	if err != nil {
		return nil, "", err
	}
	tok.Grant = o
	if o.RefreshTTL <= 0 || !slices.Contains(c.Scopes, "offline_access") {
		return tok, secret, err
	}
	if o.Family, err = tx.NewID(); err != nil {
		return nil, "", err
	}
	rec := RefreshToken{
		ClientID: c.ClientID, MemberID: c.MemberID, Family: o.Family, Scopes: c.Scopes,
		AuthTime: o.AuthTime, AMR: o.AMR, AccessTTL: o.AccessTTL, RefreshTTL: o.RefreshTTL, Stamp: c.Stamp,
		grantGen: c.grantGen,
	}
	tok.Refresh, err = putRefresh(tx, rec, &family{}, storage.Digest(secret))
	return tok, secret, err
}

// putRefresh stores a new refresh token of rec's family, which becomes
// the family's current one, with accessDigest among its access tokens.
func putRefresh(tx *storage.Tx, rec RefreshToken, fam *family, accessDigest string) (string, error) {
	secret := storage.NewSecret(RefreshPrefix, 32)
	d := storage.Digest(secret)
	rec.CreatedAt = time.Now().UTC().Truncate(time.Second)
	rec.ExpiresAt = rec.CreatedAt.Add(rec.RefreshTTL)
	rec.Used = false
	if err := tx.PutJSON(refreshKey(d), rec, rec.RefreshTTL); err != nil {
		return "", err
	}
	ref := memberTokenRef{Scopes: rec.Scopes, CreatedAt: rec.CreatedAt}
	if err := putRef(tx, rec.MemberID, rec.ClientID, rec.grantGen, d, ref, rec.RefreshTTL); err != nil {
		return "", err
	}
	fam.Current = d
	fam.grantGen = rec.grantGen
	fam.Access = append(fam.Access, accessDigest)
	if n := len(fam.Access); n > maxFamilyAccess {
		fam.Access = fam.Access[n-maxFamilyAccess:]
	}
	return secret, tx.PutJSON(familyKey(rec.MemberID, rec.ClientID, rec.Family), fam, rec.RefreshTTL)
}

// revokeFamily ends a family: its current refresh token and its access
// tokens. A family already gone is left alone.
func revokeFamily(tx *storage.Tx, memberID, clientID, id string) error {
	var fam family
	err := tx.GetJSON(familyKey(memberID, clientID, id), &fam)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, d := range fam.Access {
		if err := deleteToken(tx, d); err != nil {
			return err
		}
	}
	if err := tx.Delete(refreshKey(fam.Current)); err != nil {
		return err
	}
	if err := deleteRef(tx, memberID, clientID, fam.grantGen, fam.Current); err != nil {
		return err
	}
	return tx.Delete(familyKey(memberID, clientID, id))
}

// Refresh exchanges a refresh token of clientID for a new access token and
// a new refresh token of the same family (the returned token's Refresh),
// with scopes (nil: the same; else a subset, checked by the caller). It
// returns storage.ErrNotFound for an unknown, expired or revoked token or
// another client's, ErrRefreshReused for a token that was replaced before
// (the family is then revoked), and members.ErrSuspended or
// storage.ErrNotFound when the member can no longer be served.
func (s Store) Refresh(ctx context.Context, clientID, token string, scopes []string) (*AccessToken, string, *RefreshToken, error) {
	if token == "" || len(token) > 256 {
		return nil, "", nil, storage.ErrNotFound
	}
	d := storage.Digest(token)
	var tok *AccessToken
	var secret string
	var rec RefreshToken
	reused := false
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		tok, secret, reused = nil, "", false
		if err := tx.GetJSON(refreshKey(d), &rec); err != nil {
			return err
		}
		if rec.ClientID != clientID || !now().Before(rec.ExpiresAt) {
			return storage.ErrNotFound
		}
		var fam family
		if err := tx.GetJSON(familyKey(rec.MemberID, rec.ClientID, rec.Family), &fam); err != nil {
			return err
		}
		if rec.Used || fam.Current != d {
			reused = true
			return revokeFamily(tx, rec.MemberID, rec.ClientID, rec.Family)
		}
		if err := rec.grantLive(tx); err != nil {
			return err
		}
		if scopes == nil {
			scopes = rec.Scopes
		}
		for _, sc := range scopes {
			if !slices.Contains(rec.Scopes, sc) {
				return ErrScopeNotGranted
			}
		}
		var err error
		tok, secret, err = createTokenFor(tx, "", rec.ClientID, rec.MemberID, rec.grantGen, scopes, rec.AccessTTL)
		if err != nil {
			return err
		}
		// The presented token stays, used, for as long as it would have
		// lived: presenting it again is a reuse.
		used := rec
		used.Used = true
		if err := tx.PutJSON(refreshKey(d), used, time.Until(rec.ExpiresAt)+time.Second); err != nil {
			return err
		}
		if err := deleteRef(tx, rec.MemberID, rec.ClientID, rec.grantGen, d); err != nil {
			return err
		}
		next := rec
		next.Scopes = scopes
		tok.Refresh, err = putRefresh(tx, next, &fam, storage.Digest(secret))
		tok.Grant = &CodeOIDC{AuthTime: rec.AuthTime, AMR: rec.AMR}
		return err
	})
	if err != nil {
		return nil, "", nil, err
	}
	if reused {
		return nil, "", nil, ErrRefreshReused
	}
	return tok, secret, &rec, nil
}

// grantLive is whether the grant rec was issued in still holds: its member
// is not suspended (members.ErrSuspended), has the credentials it had
// (security stamp) and revoked neither its access nor the app
// (storage.ErrNotFound). Refresh and RefreshRecord ask the same.
func (rec *RefreshToken) grantLive(tx *storage.Tx) error {
	m, err := members.ByID(tx, rec.MemberID)
	if err != nil {
		return err
	}
	if m.Suspended {
		return members.ErrSuspended
	}
	if m.SecurityStamp != rec.Stamp {
		return storage.ErrNotFound
	}
	p, err := readPair(tx, rec.MemberID, rec.ClientID)
	if err != nil {
		return err
	}
	if !rec.liveIn(m, p) {
		return storage.ErrNotFound
	}
	return nil
}

// RevokeRefresh revokes the family of refresh token token if it was issued
// to clientID (RFC 7009 section 2.1: the access tokens of the same grant go
// too). It reports whether token was a refresh token at all; unknown and
// other clients' tokens are left alone without error.
func (s Store) RevokeRefresh(ctx context.Context, clientID, token string) (bool, error) {
	if token == "" || len(token) > 256 {
		return false, nil
	}
	found := false
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var rec RefreshToken
		err := tx.GetJSON(refreshKey(storage.Digest(token)), &rec)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if rec.ClientID != clientID {
			return nil
		}
		return revokeFamily(tx, rec.MemberID, rec.ClientID, rec.Family)
	})
	return found, err
}

// RefreshRecord returns the live refresh token token (for introspection),
// one Refresh would take from its client: storage.ErrNotFound when it is
// unknown, expired, replaced or revoked, its client removed, or its
// member's credentials changed since it was issued (members.ErrSuspended
// for a suspended member's).
func (s Store) RefreshRecord(ctx context.Context, token string) (*RefreshToken, error) {
	if token == "" || len(token) > 256 {
		return nil, storage.ErrNotFound
	}
	d := storage.Digest(token)
	var rec RefreshToken
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(refreshKey(d), &rec); err != nil {
			return err
		}
		var fam family
		if err := tx.GetJSON(familyKey(rec.MemberID, rec.ClientID, rec.Family), &fam); err != nil {
			return err
		}
		if rec.Used || fam.Current != d || !now().Before(rec.ExpiresAt) {
			return storage.ErrNotFound
		}
		// A removed client can no longer present its tokens (it cannot
		// authenticate), so they are not live either.
		if ok, err := tx.Has(appKey(rec.ClientID)); err != nil || !ok {
			return cmp.Or(err, storage.ErrNotFound)
		}
		return rec.grantLive(tx)
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}
