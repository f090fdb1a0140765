package grants

// Authorization codes: issued at consent (CreateCode, CreateCodeOIDC),
// exchanged once for a token (ExchangeCode), and a code used twice revokes
// what it issued.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// CreateCode records an authorization code that m (as its session read
// it) granted to the app for redirectURI and scopes, and returns the code.
// It lives for CodeLifetime. It returns members.ErrCredentialsChanged when
// m's credentials changed since it was read (members.CheckStamp).
func (s Store) CreateCode(ctx context.Context, clientID string, m *members.Member, redirectURI string, scopes []string, codeChallenge string) (string, error) {
	return s.CreateCodeOIDC(ctx, clientID, m, redirectURI, scopes, codeChallenge, nil, nil)
}

// CreateCodeOIDC is CreateCode for an operator client's code, carrying
// what its ID token and tokens need (oidc; nil: as CreateCode). With sign,
// the code's ID token is signed now, before the code is stored, and kept
// with it for the exchange to return (CodeOIDC.IDToken).
func (s Store) CreateCodeOIDC(ctx context.Context, clientID string, m *members.Member, redirectURI string, scopes []string, codeChallenge string, oidc *CodeOIDC, sign IDTokenSigner) (string, error) {
	code := storage.NewSecret(CodePrefix, 32)
	if oidc != nil && sign != nil {
		o := *oidc
		o.Seed = storage.NewSecret("", 32)
		var err error
		if o.IDToken, err = sign(accessTokenFor(code, o.Seed)); err != nil {
			return "", err
		}
		oidc = &o
	}
	rec := Code{
		ClientID:      clientID,
		MemberID:      m.ID,
		RedirectURI:   redirectURI,
		Scopes:        scopes,
		CodeChallenge: codeChallenge,
		CreatedAt:     time.Now().UTC(),
		Stamp:         m.SecurityStamp,
		OIDC:          oidc,
	}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		cur, err := members.CheckStamp(tx, m)
		if err != nil {
			return err
		}
		if rec.grantGen, err = grantOf(tx, cur, clientID); err != nil {
			return err
		}
		if err := notePair(tx, cur.ID, clientID); err != nil {
			return err
		}
		return tx.PutJSON(codeKey(storage.Digest(code)), rec, CodeLifetime)
	})
	if err != nil {
		return "", err
	}
	return code, nil
}

// CodeCheck decides, inside ExchangeCode's transaction, whether the
// presented code may be exchanged. A non-nil error refuses the exchange;
// the code is consumed either way.
type CodeCheck func(c *Code) error

// ExchangeCode exchanges an authorization code for an access token of
// its member, once. The code is looked up by its digest; check validates
// client, redirect URI and PKCE verifier against the record.
//
// It returns storage.ErrNotFound for an unknown or expired code, ErrCodeUsed for a
// code that was used before (and then revokes the token issued from it),
// members.ErrSuspended or storage.ErrNotFound when the member can no longer be served
// (storage.ErrNotFound too for a code granted before a change of the
// member's credentials: Code.Stamp), and
// check's error; ErrCodeUsed and check's error come as a *CodeRefusal
// naming the code's member. Concurrent exchanges of one code issue at most one token:
// the transaction that consumes it fails on a conflict instead of retrying;
// the code is then read again, and if it is now used the loser is treated
// as a second use. Otherwise the conflict was with another transaction (on
// PostgreSQL, SSI's page-granular predicate locks can fail the exchanges of
// two different codes of one member and app) and the exchange runs again, up to maxCodeExchangeAttempts times.
func (s Store) ExchangeCode(ctx context.Context, code string, check CodeCheck) (*AccessToken, string, error) {
	if code == "" || len(code) > 256 {
		return nil, "", storage.ErrNotFound
	}
	ck := codeKey(storage.Digest(code))
	var tok *AccessToken
	var secret string
	var checkErr error
	var memberID string
	exchange := func(tx *storage.Tx) error {
		tok, secret, checkErr = nil, "", nil
		var c Code
		if err := tx.GetJSON(ck, &c); err != nil {
			return err
		}
		memberID = c.MemberID
		if c.Used {
			return ErrCodeUsed
		}
		age := now().Sub(c.CreatedAt)
		if age > CodeLifetime {
			return storage.ErrNotFound
		}
		ttl := max(CodeLifetime-age, 0) + time.Second
		// A code the member granted before revoking the app in settings
		// must not bring the app back. Every code is granted with its
		// pair (notePair); a code without one was granted by a version
		// before that, which a revocation since cannot have moved
		// (RevokeAppForMember writes nothing for an app without a pair
		// or a live token): refused, the member authorizes again.
		var p pairState
		if err := tx.GetJSON(pairKey(c.MemberID, c.ClientID), &p); err != nil {
			return err
		}
		if c.AppGen != p.Gen {
			return storage.ErrNotFound
		}
		c.Used = true
		if err := check(&c); err != nil {
			// A failed exchange consumes the code.
			checkErr = err
			c.forgetPrepared()
			return tx.PutJSON(ck, c, ttl)
		}
		m, err := members.ByID(tx, c.MemberID)
		if err != nil {
			return err
		}
		if m.Suspended {
			return members.ErrSuspended
		}
		if m.SecurityStamp != c.Stamp || c.MemberGen != m.AccessGen {
			// Granted before the member's credentials changed (the
			// change ended the session that granted it) or before a
			// revocation of the member's access.
			return storage.ErrNotFound
		}
		tok, secret, err = issueForCode(tx, &c, code)
		if err != nil {
			return err
		}
		c.TokenDigest = storage.Digest(secret)
		c.forgetPrepared()
		return tx.PutJSON(ck, c, ttl)
	}
	var err error
	backoff := storage.RetryBackoffMin
	for attempt := 1; ; attempt++ {
		err = s.st.UpdateOnce(ctx, exchange)
		if !errors.Is(err, storage.ErrConflict) {
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
		backoff = min(2*backoff, storage.RetryBackoffMax)
	}
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, ErrCodeUsed) {
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
func (s Store) codeUsed(ctx context.Context, ck []byte) (bool, error) {
	var c Code
	err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(ck, &c) })
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return c.Used, err
}

// revokeTokenOfCode revokes the token issued from the code stored at ck,
// if it has one, and forgets it: revoked says whether there was one.
func (s Store) revokeTokenOfCode(ctx context.Context, ck []byte) (revoked bool, err error) {
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		revoked = false
		var c Code
		err := tx.GetJSON(ck, &c)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.TokenDigest == "" {
			return nil
		}
		if err := deleteToken(tx, c.TokenDigest); err != nil {
			return err
		}
		if c.OIDC != nil && c.OIDC.Family != "" {
			if err := revokeFamily(tx, c.MemberID, c.ClientID, c.OIDC.Family); err != nil {
				return err
			}
		}
		revoked, c.TokenDigest = true, ""
		ttl := max(CodeLifetime-now().Sub(c.CreatedAt), 0) + time.Second
		return tx.PutJSON(ck, c, ttl)
	})
	return revoked, err
}
