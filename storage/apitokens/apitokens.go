// Package apitokens holds the members' API tokens of hearth_graphql (the
// bearer tokens a member makes on the settings page or an operator makes
// for them) and their newsletter inbound addresses (the secret of the
// mail webhook), over the engine-agnostic core in storage (keys under
// "gql/tok/", "gql/inbound…" and "u/<member>/gql/…"). Secrets are kept
// only as their storage.Digest.
//
// A Store is a value holding only the *storage.Store: it keeps no state of
// its own (a token's member comes from members.Cache), so Of may be
// called anywhere, as often as wanted, without allocating.
package apitokens

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Store is the API tokens and inbound addresses of one storage.Store.
type Store struct{ st *storage.Store }

// Of returns the API tokens and inbound addresses of st.
func Of(st *storage.Store) Store { return Store{st} }

// API tokens of the GraphQL service and the member's newsletter inbound
// secret. Layout:
//
//	gql/tok/<digest>          APITokenRef (global lookup; removed by DeleteMember)
//	u/<member>/gql/tok/<id>   Token
//	gql/inbound/<digest>      member id (global lookup; removed by DeleteMember)
//	u/<member>/gql/inbound    Inbound

// Token is a member's token for the GraphQL API. Only its digest is kept.
type Token struct {
	ID         string     `json:"id"`
	MemberID   string     `json:"member_id"`
	Name       string     `json:"name"`
	Digest     string     `json:"digest"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	// Origin is how the token was made; empty only in records written
	// before origins were kept that the migration has not seen yet.
	Origin Origin `json:"origin,omitempty"`
}

// Origin says who made an API token. There is no OAuth origin:
// an OAuth access token (or an API token) cannot make API tokens, so no
// API token outlives the grant of an app.
type Origin string

// Origins of API tokens.
const (
	// OriginSession: the member's own signed-in session (the API tokens
	// settings page, or GraphQL's createApiToken with the session cookie).
	OriginSession Origin = "session"
	// OriginOperator: the site's operator (admin API, caddy hearth token
	// create).
	OriginOperator Origin = "operator"
	// OriginLegacy: made before origins were kept, when an OAuth access
	// token could still make API tokens; see migrateAPITokenOrigins.
	OriginLegacy Origin = "legacy"
)

// Expired reports whether the token has expired at t.
func (t *Token) Expired(at time.Time) bool { return t.ExpiresAt != nil && !at.Before(*t.ExpiresAt) }

type apiTokenRef struct {
	MemberID string `json:"member_id"`
	TokenID  string `json:"token_id"`
	// Origin is the token's; a ref without one was written before origins
	// were kept (migrateAPITokenOrigins looks for those).
	Origin Origin `json:"origin,omitempty"`
}

// Prefix starts every API token (Inboxt's prefix). The token is the
// prefix and 52 random bytes in base64url: 74 characters, 416 bits.
const Prefix = "app_"

// Limits and presets of API tokens.
const (
	apiTokenRandomBytes = 52
	MaxNameLen          = 100
	MaxPerMember        = 100
	// LastUsedResolution is how often lastUsedAt is written at most.
	LastUsedResolution = time.Minute
)

// Expiries are the allowed lifetimes by name; 0 is never.
var Expiries = map[string]time.Duration{
	"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour,
	"90d": 90 * 24 * time.Hour, "never": 0,
}

// ParseExpiry reads one of 1d, 7d, 30d, 90d or never.
func ParseExpiry(s string) (time.Duration, error) {
	d, ok := Expiries[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, storage.Invalid("expires must be one of 1d, 7d, 30d, 90d or never")
	}
	return d, nil
}

func apiTokenRefKey(digest string) []byte    { return storage.Key("gql", "tok", digest) }
func apiTokenKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "tok", id) }
func inboundRefKey(digest string) []byte     { return storage.Key("gql", "inbound", digest) }
func inboundKey(memberID string) []byte      { return storage.Key("u", memberID, "gql", "inbound") }
func inboundIDKey(id string) []byte          { return storage.Key("gql", "inboundid", id) }

// Create makes a token for the member that expires after lifetime
// (0: never), asked for by the member's own signed-in session
// (OriginSession): only the session may make API tokens, never an OAuth
// access token or another API token. It returns the record and the token,
// which is never stored and cannot be shown again.
func (s Store) Create(ctx context.Context, memberID, name string, lifetime time.Duration) (*Token, string, error) {
	return s.createAPIToken(ctx, memberID, nil, name, lifetime, OriginSession)
}

// CreateFromSession is Create for m as its session read it: it returns
// members.ErrCredentialsChanged when m's credentials changed since (the
// change ended that session), checked in the transaction that stores the
// token (members.CheckStamp), so a request of a session that a password
// change or two-factor sign-in ended while it ran makes no token.
func (s Store) CreateFromSession(ctx context.Context, m *members.Member, name string, lifetime time.Duration) (*Token, string, error) {
	return s.createAPIToken(ctx, m.ID, m, name, lifetime, OriginSession)
}

// CreateOperator is Create for the site's operator (admin
// API and CLI): the token is recorded as OriginOperator.
func (s Store) CreateOperator(ctx context.Context, memberID, name string, lifetime time.Duration) (*Token, string, error) {
	return s.createAPIToken(ctx, memberID, nil, name, lifetime, OriginOperator)
}

// createAPIToken makes the token; read, when set, is the member as its
// session read it (CreateFromSession).
func (s Store) createAPIToken(ctx context.Context, memberID string, read *members.Member, name string, lifetime time.Duration, origin Origin) (*Token, string, error) {
	name, err := storage.CleanLine(name, MaxNameLen, "name")
	if err != nil {
		return nil, "", err
	}
	if name == "" {
		return nil, "", storage.InvalidField("name", "name must not be empty")
	}
	if storage.HasControl(name) {
		return nil, "", storage.InvalidField("name", "name must not contain control characters")
	}
	if lifetime < 0 {
		return nil, "", storage.Invalid("lifetime must not be negative")
	}
	secret := storage.NewSecret(Prefix, apiTokenRandomBytes)
	t := storage.Now()
	tok := &Token{MemberID: memberID, Name: name, Digest: storage.Digest(secret), CreatedAt: t, Origin: origin}
	if lifetime > 0 {
		exp := t.Add(lifetime)
		tok.ExpiresAt = &exp
	}
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if read != nil {
			if _, err := members.CheckStamp(tx, read); err != nil {
				return err
			}
		} else if m, err := members.ByID(tx, memberID); err != nil {
			return err
		} else if m.Suspended {
			return members.ErrSuspended
		}
		if err := tx.GuardCount(memberID, "tok"); err != nil {
			return err
		}
		n := 0
		if err := tx.Scan(storage.Key("u", memberID, "gql", "tok", ""), nil, false, true, func(_, _ []byte) (bool, error) {
			n++
			return true, nil
		}); err != nil {
			return err
		}
		if n >= MaxPerMember {
			return storage.Invalid("at most %d API tokens; delete unused ones first", MaxPerMember)
		}
		if tok.ID, err = tx.FreshID(func(id string) []byte { return apiTokenKey(memberID, id) }); err != nil {
			return err
		}
		var ttl time.Duration
		if lifetime > 0 {
			ttl = lifetime + time.Hour // the check below refuses it on time; the TTL only cleans up
		}
		if err := tx.PutJSON(apiTokenRefKey(tok.Digest), apiTokenRef{MemberID: memberID, TokenID: tok.ID, Origin: origin}, ttl); err != nil {
			return err
		}
		return tx.PutJSON(apiTokenKey(memberID, tok.ID), tok, 0)
	})
	if err != nil {
		return nil, "", err
	}
	return tok, secret, nil
}

// List lists the member's tokens, newest first.
func (s Store) List(ctx context.Context, memberID string) ([]*Token, error) {
	var out []*Token
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return tx.Scan(storage.Key("u", memberID, "gql", "tok", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var t Token
			if err := json.Unmarshal(v, &t); err != nil {
				return false, err
			}
			out = append(out, &t)
			return true, nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, err
}

// Delete removes one of the member's tokens; it stops working at once.
func (s Store) Delete(ctx context.Context, memberID, id string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var t Token
		if err := tx.GetJSON(apiTokenKey(memberID, id), &t); err != nil {
			return err
		}
		return deleteToken(tx, memberID, t)
	})
}

// deleteToken removes the member's token t (read in tx).
func deleteToken(tx *storage.Tx, memberID string, t Token) error {
	if err := tx.Delete(apiTokenRefKey(t.Digest)); err != nil {
		return err
	}
	return tx.Delete(apiTokenKey(memberID, t.ID))
}

// SetExpiry changes when one of the member's tokens expires (nil:
// never); a time in the past makes it stop working at once. Members choose
// a lifetime when they create a token; this is for operators' tools and
// tests.
func (s Store) SetExpiry(ctx context.Context, memberID, id string, expiresAt *time.Time) (*Token, error) {
	var tok Token
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(apiTokenKey(memberID, id), &tok); err != nil {
			return err
		}
		tok.ExpiresAt = nil
		var ttl time.Duration
		if expiresAt != nil {
			exp := expiresAt.UTC()
			tok.ExpiresAt = &exp
			// As in Create: the check refuses the token on time;
			// the TTL only cleans up.
			if ttl = time.Until(exp) + time.Hour; ttl <= 0 {
				if err := tx.Delete(apiTokenRefKey(tok.Digest)); err != nil {
					return err
				}
				return tx.PutJSON(apiTokenKey(memberID, id), &tok, 0)
			}
		}
		if err := tx.PutJSON(apiTokenRefKey(tok.Digest), apiTokenRef{MemberID: memberID, TokenID: id, Origin: tok.Origin}, ttl); err != nil {
			return err
		}
		return tx.PutJSON(apiTokenKey(memberID, id), &tok, 0)
	})
	if err != nil {
		return nil, err
	}
	return &tok, nil
}

// LooksLike reports whether s has the shape of an API token.
func LooksLike(s string) bool {
	return strings.HasPrefix(s, Prefix) && len(s) >= 40 && len(s) <= 128
}

// Unknown reports whether err, from a lookup by secret (Member,
// FeedMember, InboundMember, ContentLinkOf), means the secret leads to no
// one: unknown, expired or revoked, or its member suspended. A secret URL
// answers these alike, so that it reveals nothing.
func Unknown(err error) bool {
	return errors.Is(err, storage.ErrNotFound) || errors.Is(err, members.ErrSuspended)
}

// Member returns the member and token record for an API token. It
// returns storage.ErrNotFound for unknown, deleted or expired tokens and for gone
// members, and members.ErrSuspended for suspended members. lastUsedAt is written at
// most once per LastUsedResolution.
func (s Store) Member(ctx context.Context, secret string) (*members.Member, *Token, error) {
	if !LooksLike(secret) {
		return nil, nil, storage.ErrNotFound
	}
	d := storage.Digest(secret)
	var m *members.Member
	var tok Token
	mgen := members.Cache.Of(s.st).Generation()
	readMember := false
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var ref apiTokenRef
		if err := tx.GetJSON(apiTokenRefKey(d), &ref); err != nil {
			return err
		}
		if err := tx.GetJSON(apiTokenKey(ref.MemberID, ref.TokenID), &tok); err != nil {
			return err
		}
		var err error
		m, readMember, err = members.Cached(s.st, tx, ref.MemberID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if readMember {
		members.Cache.Of(s.st).Add(mgen, m.ID, m)
	}
	if !storage.SecretMatches(secret, tok.Digest) {
		return nil, nil, storage.ErrNotFound
	}
	t := time.Now().UTC()
	if tok.Expired(t) {
		return nil, nil, storage.ErrNotFound
	}
	if m.Suspended {
		return nil, nil, members.ErrSuspended
	}
	if tok.LastUsedAt == nil || t.Sub(*tok.LastUsedAt) >= LastUsedResolution {
		used := t.Truncate(time.Second)
		_ = s.st.Update(ctx, func(tx *storage.Tx) error {
			var cur Token
			if err := tx.GetJSON(apiTokenKey(m.ID, tok.ID), &cur); err != nil {
				return err
			}
			if cur.LastUsedAt != nil && used.Sub(*cur.LastUsedAt) < LastUsedResolution {
				return nil
			}
			cur.LastUsedAt = &used
			return tx.PutJSON(apiTokenKey(m.ID, tok.ID), &cur, 0)
		})
		tok.LastUsedAt = &used
	}
	return m, &tok, nil
}

// migrateAPITokenOrigins gives an origin to the live API tokens written
// before origins were kept (runs at Open and after Restore; idempotent: it
// only looks at token refs without an origin, and gives each one).
//
// In earlier versions, an OAuth access token with read and write could call
// createApiToken, and nothing recorded that it had: such a token kept
// working after the member revoked the app. Which old tokens came from an
// OAuth grant cannot be known (a revoked grant leaves no record), so:
//
//   - a token made at least a second before the first OAuth app was
//     registered on the site (apps are never deleted) cannot have come
//     from a grant: it stays, as OriginLegacy;
//   - every other one may have: it expires now (its record stays, so the
//     member sees it as expired on the API tokens page and makes a new one
//     there), as OriginLegacy.
//
// It returns how many tokens were kept and expired.
func (s Store) migrateAPITokenOrigins(ctx context.Context) (kept, expired int, err error) {
	type pending struct {
		digest string
		ref    apiTokenRef
	}
	var todo []pending
	var firstApp time.Time
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		prefix := apiTokenRefKey("")
		err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			var ref apiTokenRef
			if err := json.Unmarshal(v, &ref); err != nil {
				return false, err
			}
			if ref.Origin == "" {
				todo = append(todo, pending{string(k[len(prefix):]), ref})
			}
			return true, nil
		})
		if err != nil || len(todo) == 0 {
			return err
		}
		// The OAuth applications' records (storage/grants), of which
		// only the creation time is read here.
		return tx.Scan(storage.Key("oauth", "app", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var app struct {
				CreatedAt time.Time `json:"created_at"`
			}
			if err := json.Unmarshal(v, &app); err != nil {
				return false, err
			}
			if firstApp.IsZero() || app.CreatedAt.Before(firstApp) {
				firstApp = app.CreatedAt
			}
			return true, nil
		})
	})
	if err != nil || len(todo) == 0 {
		return 0, 0, err
	}
	at := storage.Now()
	// In batches: a site may have many tokens, a transaction holds a few.
	for len(todo) > 0 {
		batch := todo[:min(len(todo), 200)]
		todo = todo[len(batch):]
		k, e := 0, 0
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			k, e = 0, 0
			for _, p := range batch {
				var tok Token
				err := tx.GetJSON(apiTokenKey(p.ref.MemberID, p.ref.TokenID), &tok)
				if errors.Is(err, storage.ErrNotFound) {
					if err := tx.Delete(apiTokenRefKey(p.digest)); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return err
				}
				if tok.Origin == "" {
					tok.Origin = OriginLegacy
				}
				safe := firstApp.IsZero() || !tok.CreatedAt.Add(time.Second).After(firstApp)
				if tok.Origin != OriginLegacy || safe {
					// Still live: the ref keeps its TTL, only its value changes.
					if ok, err := tx.Has(apiTokenRefKey(p.digest)); err != nil || !ok {
						if err != nil {
							return err
						}
						continue // deleted meanwhile
					}
					// The ref expires an hour after the token, as
					// IssueAPIToken wrote it.
					var ttl time.Duration
					if tok.ExpiresAt != nil {
						if ttl = time.Until(tok.ExpiresAt.Add(time.Hour)); ttl <= 0 {
							ttl = time.Second
						}
					}
					ref := p.ref
					ref.Origin = tok.Origin
					if err := tx.PutJSON(apiTokenRefKey(p.digest), ref, ttl); err != nil {
						return err
					}
					k++
				} else {
					if tok.ExpiresAt == nil || tok.ExpiresAt.After(at) {
						tok.ExpiresAt = &at
					}
					if err := tx.Delete(apiTokenRefKey(p.digest)); err != nil {
						return err
					}
					e++
				}
				if err := tx.PutJSON(apiTokenKey(p.ref.MemberID, p.ref.TokenID), &tok, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return kept, expired, err
		}
		kept, expired = kept+k, expired+e
	}
	return kept, expired, nil
}

// --- newsletter inbound address ---

// Inbound is a member's newsletter inbound address: only the digest of its
// secret, and what can be shown of it later.
type Inbound struct {
	// ID names this address; a new address has a new id.
	ID        string    `json:"id,omitempty"`
	Digest    string    `json:"digest"`
	CreatedAt time.Time `json:"created_at"`
	// Site is the scheme and host the address was created on (the URL
	// without its secret can be shown later); empty for older records.
	Site string `json:"site,omitempty"`
}

// InboundPrefix starts every inbound secret.
const InboundPrefix = "nl_"

// RotateInboundSecret gives the member a new newsletter inbound secret,
// replacing the old one (which stops working at once), and returns it.
// site is the scheme and host the address is made on, kept to show the
// address (without its secret) later.
func (s Store) RotateInboundSecret(ctx context.Context, memberID, site string) (string, error) {
	if len(site) > library.MaxURLLen {
		return "", storage.Invalid("site must be at most %d characters", library.MaxURLLen)
	}
	secret := storage.NewSecret(InboundPrefix, 32)
	in := Inbound{Digest: storage.Digest(secret), CreatedAt: storage.Now(), Site: site}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if _, err := members.ByID(tx, memberID); err != nil {
			return err
		}
		var err error
		if in.ID, err = freshInboundID(tx); err != nil {
			return err
		}
		var old Inbound
		if err := tx.GetJSON(inboundKey(memberID), &old); err == nil {
			if err := tx.Delete(inboundRefKey(old.Digest)); err != nil {
				return err
			}
			if err := tx.Delete(inboundIDKey(old.id())); err != nil {
				return err
			}
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if err := tx.Put(inboundRefKey(in.Digest), []byte(memberID), 0); err != nil {
			return err
		}
		if err := tx.Put(inboundIDKey(in.ID), []byte(memberID), 0); err != nil {
			return err
		}
		return tx.PutJSON(inboundKey(memberID), in, 0)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// inboundIDBytes is how many random bytes an address id carries: 80 bits,
// so that nobody who can send mail to the domain can guess a member's
// address (the ids of addresses made before were creation times).
const inboundIDBytes = 10

// inboundIDEncoding writes ids in lower case letters and digits: the id is
// the local part of an e-mail address, which mail systems may change the
// case of (the webhook reads recipients in lower case).
var inboundIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// freshInboundID returns a random address id that no address has.
func freshInboundID(tx *storage.Tx) (string, error) {
	for {
		b := make([]byte, inboundIDBytes)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		id := strings.ToLower(inboundIDEncoding.EncodeToString(b))
		if _, err := tx.Get(inboundIDKey(id)); errors.Is(err, storage.ErrNotFound) {
			return id, nil
		} else if err != nil {
			return "", err
		}
	}
}

// isInboundID reports whether s has the form of an address id: a random
// id, or the time-based id of an address made before ids were random
// (those keep working).
func isInboundID(s string) bool {
	if storage.IsID(s) {
		return true
	}
	if len(s) != inboundIDEncoding.EncodedLen(inboundIDBytes) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// InboundInfo returns the member's inbound secret record, or storage.ErrNotFound.
func (s Store) InboundInfo(ctx context.Context, memberID string) (*Inbound, error) {
	var in Inbound
	if err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(inboundKey(memberID), &in) }); err != nil {
		return nil, err
	}
	in.ID = in.id()
	return &in, nil
}

// id is the address's id. Records made before addresses had ids get one
// in the form of new ids (storage/secret.go), from the creation time, stable
// across reads.
func (in *Inbound) id() string {
	if in.ID != "" {
		return in.ID
	}
	return strconv.FormatUint(uint64(in.CreatedAt.UnixMilli())<<16, 10)
}

// DeleteInbound removes the member's inbound secret record with id (the id
// InboundInfo shows): the URL stops working at once. storage.ErrNotFound when the
// member has none with that id.
func (s Store) DeleteInbound(ctx context.Context, memberID, id string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var in Inbound
		if err := tx.GetJSON(inboundKey(memberID), &in); err != nil {
			return err
		}
		if in.id() != id {
			return storage.ErrNotFound
		}
		if err := tx.Delete(inboundRefKey(in.Digest)); err != nil {
			return err
		}
		if err := tx.Delete(inboundIDKey(in.id())); err != nil {
			return err
		}
		return tx.Delete(inboundKey(memberID))
	})
}

// InboundMember returns the member whose inbound secret is secret
// (storage.ErrNotFound, or members.ErrSuspended for a suspended member).
func (s Store) InboundMember(ctx context.Context, secret string) (*members.Member, error) {
	if !strings.HasPrefix(secret, InboundPrefix) || len(secret) > 128 || len(secret) < 20 {
		return nil, storage.ErrNotFound
	}
	return s.memberAt(ctx, inboundRefKey(storage.Digest(secret)))
}

// memberAt returns the member whose id is the value at key:
// storage.ErrNotFound, or members.ErrSuspended for a suspended member.
func (s Store) memberAt(ctx context.Context, key []byte) (*members.Member, error) {
	var m *members.Member
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		id, err := tx.Get(key)
		if err != nil {
			return err
		}
		m, err = members.ByID(tx, string(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Suspended {
		return nil, members.ErrSuspended
	}
	return m, nil
}

// InboundMemberByID returns the member whose current inbound address has
// the id (the local part of their newsletter e-mail address): storage.ErrNotFound,
// or members.ErrSuspended for a suspended member. Addresses made before the id was
// indexed (records without an id, whose id InboundInfo derives) are found
// after IndexInboundIDs.
func (s Store) InboundMemberByID(ctx context.Context, id string) (*members.Member, error) {
	if !isInboundID(id) {
		return nil, storage.ErrNotFound
	}
	return s.memberAt(ctx, inboundIDKey(id))
}

// IndexInboundIDs indexes by id the inbound addresses that are not (made
// before the index, or with no id of their own): one pass over the
// addresses, each in a transaction of its own.
func (s Store) IndexInboundIDs(ctx context.Context) error {
	var members []string
	prefix := storage.Key("gql", "inbound", "")
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return tx.Scan(prefix, nil, false, false, func(_, v []byte) (bool, error) {
			members = append(members, string(v))
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	for _, mid := range members {
		in, err := s.InboundInfo(ctx, mid)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		err = s.st.Update(ctx, func(tx *storage.Tx) error {
			if _, err := tx.Get(inboundIDKey(in.ID)); err == nil || !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			return tx.Put(inboundIDKey(in.ID), []byte(mid), 0)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func init() {
	// Tokens made before origins were recorded (migrateOrigins).
	storage.OnMigrate(func(ctx context.Context, st *storage.Store) error {
		kept, expired, err := Of(st).migrateAPITokenOrigins(ctx)
		if err != nil {
			return fmt.Errorf("migrate API tokens: %w", err)
		}
		if kept+expired > 0 {
			st.Logger().Info("API tokens made before their origin was recorded: kept those older than the first OAuth app, expired the others",
				zap.Int("kept", kept), zap.Int("expired", expired))
		}
		return nil
	})
	// A member's access ends with their tokens (RevokeMemberAccess),
	// deleted in the revocation's transaction: a member holds at most
	// MaxPerMember of them, so that is bounded.
	members.OnRevokeAccess(func(tx *storage.Tx, m *members.Member) (tokens, apps int, err error) {
		memberID := m.ID
		var toks []Token
		err = tx.Scan(storage.Key("u", memberID, "gql", "tok", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var t Token
			if err := json.Unmarshal(v, &t); err != nil {
				return false, err
			}
			toks = append(toks, t)
			return true, nil
		})
		if err != nil {
			return 0, 0, err
		}
		for _, t := range toks {
			if err := deleteToken(tx, memberID, t); err != nil {
				return 0, 0, err
			}
		}
		return len(toks), 0, nil
	})
	members.OnDelete(func(tx *storage.Tx, memberID string) error {
		var refs [][]byte
		err := tx.Scan(storage.Key("u", memberID, "gql", "tok", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var t Token
			if err := json.Unmarshal(v, &t); err != nil {
				return false, err
			}
			refs = append(refs, apiTokenRefKey(t.Digest))
			return true, nil
		})
		if err != nil {
			return err
		}
		var in Inbound
		if err := tx.GetJSON(inboundKey(memberID), &in); err == nil {
			refs = append(refs, inboundRefKey(in.Digest), inboundIDKey(in.id()))
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		for _, k := range refs {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
