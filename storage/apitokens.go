package storage

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"
)

// API tokens of the GraphQL service and the member's newsletter inbound
// secret. Layout:
//
//	gql/tok/<digest>          APITokenRef (global lookup; removed by DeleteMember)
//	u/<member>/gql/tok/<id>   APIToken
//	gql/inbound/<digest>      member id (global lookup; removed by DeleteMember)
//	u/<member>/gql/inbound    Inbound

// APIToken is a member's token for the GraphQL API. Only its digest is kept.
type APIToken struct {
	ID         string     `json:"id"`
	MemberID   string     `json:"member_id"`
	Name       string     `json:"name"`
	Digest     string     `json:"digest"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	// Origin is how the token was made; empty only in records written
	// before origins were kept that the migration has not seen yet.
	Origin APITokenOrigin `json:"origin,omitempty"`
}

// APITokenOrigin says who made an API token. There is no OAuth origin:
// an OAuth access token (or an API token) cannot make API tokens, so no
// API token outlives the grant of an app (issue 17 point 1).
type APITokenOrigin string

// Origins of API tokens.
const (
	// OriginSession: the member's own signed-in session (the API tokens
	// settings page, or GraphQL's createApiToken with the session cookie).
	OriginSession APITokenOrigin = "session"
	// OriginOperator: the site's operator (admin API, caddy hearth token
	// create).
	OriginOperator APITokenOrigin = "operator"
	// OriginLegacy: made before origins were kept, when an OAuth access
	// token could still make API tokens; see migrateAPITokenOrigins.
	OriginLegacy APITokenOrigin = "legacy"
)

// Expired reports whether the token has expired at t.
func (t *APIToken) Expired(at time.Time) bool { return t.ExpiresAt != nil && !at.Before(*t.ExpiresAt) }

type apiTokenRef struct {
	MemberID string `json:"member_id"`
	TokenID  string `json:"token_id"`
	// Origin is the token's; a ref without one was written before origins
	// were kept (migrateAPITokenOrigins looks for those).
	Origin APITokenOrigin `json:"origin,omitempty"`
}

// APITokenPrefix starts every API token (Inboxt's prefix). The token is the
// prefix and 52 random bytes in base64url: 74 characters, 416 bits.
const APITokenPrefix = "app_"

// Limits and presets of API tokens.
const (
	apiTokenRandomBytes   = 52
	MaxAPITokenNameLen    = 100
	MaxAPITokensPerMember = 100
	// LastUsedResolution is how often lastUsedAt is written at most.
	LastUsedResolution = time.Minute
)

// APITokenExpiries are the allowed lifetimes by name; 0 is never.
var APITokenExpiries = map[string]time.Duration{
	"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour,
	"90d": 90 * 24 * time.Hour, "never": 0,
}

// ParseAPITokenExpiry reads one of 1d, 7d, 30d, 90d or never.
func ParseAPITokenExpiry(s string) (time.Duration, error) {
	d, ok := APITokenExpiries[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, Invalid("expires must be one of 1d, 7d, 30d, 90d or never")
	}
	return d, nil
}

func apiTokenRefKey(digest string) []byte    { return key("gql", "tok", digest) }
func apiTokenKey(memberID, id string) []byte { return key("u", memberID, "gql", "tok", id) }
func inboundRefKey(digest string) []byte     { return key("gql", "inbound", digest) }
func inboundKey(memberID string) []byte      { return key("u", memberID, "gql", "inbound") }
func inboundIDKey(id string) []byte          { return key("gql", "inboundid", id) }

// CreateAPIToken makes a token for the member that expires after lifetime
// (0: never), asked for by the member's own signed-in session
// (OriginSession): only the session may make API tokens, never an OAuth
// access token or another API token. It returns the record and the token,
// which is never stored and cannot be shown again.
func (s *Store) CreateAPIToken(ctx context.Context, memberID, name string, lifetime time.Duration) (*APIToken, string, error) {
	return s.createAPIToken(ctx, memberID, name, lifetime, OriginSession)
}

// CreateOperatorAPIToken is CreateAPIToken for the site's operator (admin
// API and CLI): the token is recorded as OriginOperator.
func (s *Store) CreateOperatorAPIToken(ctx context.Context, memberID, name string, lifetime time.Duration) (*APIToken, string, error) {
	return s.createAPIToken(ctx, memberID, name, lifetime, OriginOperator)
}

func (s *Store) createAPIToken(ctx context.Context, memberID, name string, lifetime time.Duration, origin APITokenOrigin) (*APIToken, string, error) {
	name, err := cleanLine(name, MaxAPITokenNameLen, "name")
	if err != nil {
		return nil, "", err
	}
	if name == "" {
		return nil, "", Invalid("name must not be empty")
	}
	if hasControl(name) {
		return nil, "", Invalid("name must not contain control characters")
	}
	if lifetime < 0 {
		return nil, "", Invalid("lifetime must not be negative")
	}
	secret := NewSecret(APITokenPrefix, apiTokenRandomBytes)
	t := now()
	tok := &APIToken{MemberID: memberID, Name: name, Digest: Digest(secret), CreatedAt: t, Origin: origin}
	if lifetime > 0 {
		exp := t.Add(lifetime)
		tok.ExpiresAt = &exp
	}
	err = s.Update(ctx, func(tx *Tx) error {
		m, err := tx.MemberByID(memberID)
		if err != nil {
			return err
		}
		if m.Suspended {
			return ErrSuspended
		}
		if err := tx.guardCount(memberID, "tok"); err != nil {
			return err
		}
		n := 0
		if err := tx.scan(key("u", memberID, "gql", "tok", ""), nil, false, true, func(_, _ []byte) (bool, error) {
			n++
			return true, nil
		}); err != nil {
			return err
		}
		if n >= MaxAPITokensPerMember {
			return Invalid("at most %d API tokens; delete unused ones first", MaxAPITokensPerMember)
		}
		if tok.ID, err = tx.freshID(func(id string) []byte { return apiTokenKey(memberID, id) }); err != nil {
			return err
		}
		var ttl time.Duration
		if lifetime > 0 {
			ttl = lifetime + time.Hour // the check below refuses it on time; the TTL only cleans up
		}
		if err := tx.putJSON(apiTokenRefKey(tok.Digest), apiTokenRef{MemberID: memberID, TokenID: tok.ID, Origin: origin}, ttl); err != nil {
			return err
		}
		return tx.putJSON(apiTokenKey(memberID, tok.ID), tok, 0)
	})
	if err != nil {
		return nil, "", err
	}
	return tok, secret, nil
}

// APITokens lists the member's tokens, newest first.
func (s *Store) APITokens(ctx context.Context, memberID string) ([]*APIToken, error) {
	var out []*APIToken
	err := s.View(ctx, func(tx *Tx) error {
		return tx.scan(key("u", memberID, "gql", "tok", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var t APIToken
			if err := unmarshal(v, &t); err != nil {
				return false, err
			}
			out = append(out, &t)
			return true, nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, err
}

// DeleteAPIToken removes one of the member's tokens; it stops working at once.
func (s *Store) DeleteAPIToken(ctx context.Context, memberID, id string) error {
	return s.Update(ctx, func(tx *Tx) error {
		var t APIToken
		if err := tx.getJSON(apiTokenKey(memberID, id), &t); err != nil {
			return err
		}
		if err := tx.delete(apiTokenRefKey(t.Digest)); err != nil {
			return err
		}
		return tx.delete(apiTokenKey(memberID, id))
	})
}

// SetAPITokenExpiry changes when one of the member's tokens expires (nil:
// never); a time in the past makes it stop working at once. Members choose
// a lifetime when they create a token; this is for operators' tools and
// tests.
func (s *Store) SetAPITokenExpiry(ctx context.Context, memberID, id string, expiresAt *time.Time) (*APIToken, error) {
	var tok APIToken
	err := s.Update(ctx, func(tx *Tx) error {
		if err := tx.getJSON(apiTokenKey(memberID, id), &tok); err != nil {
			return err
		}
		tok.ExpiresAt = nil
		var ttl time.Duration
		if expiresAt != nil {
			exp := expiresAt.UTC()
			tok.ExpiresAt = &exp
			// As in CreateAPIToken: the check refuses the token on time;
			// the TTL only cleans up.
			if ttl = time.Until(exp) + time.Hour; ttl <= 0 {
				if err := tx.delete(apiTokenRefKey(tok.Digest)); err != nil {
					return err
				}
				return tx.putJSON(apiTokenKey(memberID, id), &tok, 0)
			}
		}
		if err := tx.putJSON(apiTokenRefKey(tok.Digest), apiTokenRef{MemberID: memberID, TokenID: id, Origin: tok.Origin}, ttl); err != nil {
			return err
		}
		return tx.putJSON(apiTokenKey(memberID, id), &tok, 0)
	})
	if err != nil {
		return nil, err
	}
	return &tok, nil
}

// LooksLikeAPIToken reports whether s has the shape of an API token.
func LooksLikeAPIToken(s string) bool {
	return strings.HasPrefix(s, APITokenPrefix) && len(s) >= 40 && len(s) <= 128
}

// APITokenMember returns the member and token record for an API token. It
// returns ErrNotFound for unknown, deleted or expired tokens and for gone
// members, and ErrSuspended for suspended members. lastUsedAt is written at
// most once per LastUsedResolution.
func (s *Store) APITokenMember(ctx context.Context, secret string) (*Member, *APIToken, error) {
	if !LooksLikeAPIToken(secret) {
		return nil, nil, ErrNotFound
	}
	d := Digest(secret)
	var m *Member
	var tok APIToken
	mgen := MemberCache.Of(s).Generation()
	readMember := false
	err := s.View(ctx, func(tx *Tx) error {
		var ref apiTokenRef
		if err := tx.getJSON(apiTokenRefKey(d), &ref); err != nil {
			return err
		}
		if err := tx.getJSON(apiTokenKey(ref.MemberID, ref.TokenID), &tok); err != nil {
			return err
		}
		var err error
		m, readMember, err = s.cachedMember(tx, ref.MemberID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if readMember {
		MemberCache.Of(s).Add(mgen, m.ID, m)
	}
	if !SecretMatches(secret, tok.Digest) {
		return nil, nil, ErrNotFound
	}
	t := time.Now().UTC()
	if tok.Expired(t) {
		return nil, nil, ErrNotFound
	}
	if m.Suspended {
		return nil, nil, ErrSuspended
	}
	if tok.LastUsedAt == nil || t.Sub(*tok.LastUsedAt) >= LastUsedResolution {
		used := t.Truncate(time.Second)
		_ = s.Update(ctx, func(tx *Tx) error {
			var cur APIToken
			if err := tx.getJSON(apiTokenKey(m.ID, tok.ID), &cur); err != nil {
				return err
			}
			if cur.LastUsedAt != nil && used.Sub(*cur.LastUsedAt) < LastUsedResolution {
				return nil
			}
			cur.LastUsedAt = &used
			return tx.putJSON(apiTokenKey(m.ID, tok.ID), &cur, 0)
		})
		tok.LastUsedAt = &used
	}
	return m, &tok, nil
}

// migrateAPITokenOrigins gives an origin to the live API tokens written
// before origins were kept (runs at Open and after Restore; idempotent: it
// only looks at token refs without an origin, and gives each one).
//
// Until issue 17, an OAuth access token with read and write could call
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
func (s *Store) migrateAPITokenOrigins(ctx context.Context) (kept, expired int, err error) {
	type pending struct {
		digest string
		ref    apiTokenRef
	}
	var todo []pending
	var firstApp time.Time
	err = s.View(ctx, func(tx *Tx) error {
		prefix := apiTokenRefKey("")
		err := tx.scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			var ref apiTokenRef
			if err := unmarshal(v, &ref); err != nil {
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
		return tx.scan(key("oauth", "app", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var app struct {
				CreatedAt time.Time `json:"created_at"`
			}
			if err := unmarshal(v, &app); err != nil {
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
	at := now()
	// In batches: a site may have many tokens, a transaction holds a few.
	for len(todo) > 0 {
		batch := todo[:min(len(todo), 200)]
		todo = todo[len(batch):]
		k, e := 0, 0
		err := s.Update(ctx, func(tx *Tx) error {
			k, e = 0, 0
			for _, p := range batch {
				var tok APIToken
				err := tx.getJSON(apiTokenKey(p.ref.MemberID, p.ref.TokenID), &tok)
				if errors.Is(err, ErrNotFound) {
					if err := tx.delete(apiTokenRefKey(p.digest)); err != nil {
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
					if ok, err := tx.has(apiTokenRefKey(p.digest)); err != nil || !ok {
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
					if err := tx.putJSON(apiTokenRefKey(p.digest), ref, ttl); err != nil {
						return err
					}
					k++
				} else {
					if tok.ExpiresAt == nil || tok.ExpiresAt.After(at) {
						tok.ExpiresAt = &at
					}
					if err := tx.delete(apiTokenRefKey(p.digest)); err != nil {
						return err
					}
					e++
				}
				if err := tx.putJSON(apiTokenKey(p.ref.MemberID, p.ref.TokenID), &tok, 0); err != nil {
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
func (s *Store) RotateInboundSecret(ctx context.Context, memberID, site string) (string, error) {
	if len(site) > MaxURLLen {
		return "", Invalid("site must be at most %d characters", MaxURLLen)
	}
	secret := NewSecret(InboundPrefix, 32)
	in := Inbound{Digest: Digest(secret), CreatedAt: now(), Site: site}
	err := s.Update(ctx, func(tx *Tx) error {
		if _, err := tx.MemberByID(memberID); err != nil {
			return err
		}
		var err error
		if in.ID, err = tx.freshID(inboundIDKey); err != nil {
			return err
		}
		var old Inbound
		if err := tx.getJSON(inboundKey(memberID), &old); err == nil {
			if err := tx.delete(inboundRefKey(old.Digest)); err != nil {
				return err
			}
			if err := tx.delete(inboundIDKey(old.id())); err != nil {
				return err
			}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := tx.put(inboundRefKey(in.Digest), []byte(memberID), 0); err != nil {
			return err
		}
		if err := tx.put(inboundIDKey(in.ID), []byte(memberID), 0); err != nil {
			return err
		}
		return tx.putJSON(inboundKey(memberID), in, 0)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// InboundInfo returns the member's inbound secret record, or ErrNotFound.
func (s *Store) InboundInfo(ctx context.Context, memberID string) (*Inbound, error) {
	var in Inbound
	if err := s.View(ctx, func(tx *Tx) error { return tx.getJSON(inboundKey(memberID), &in) }); err != nil {
		return nil, err
	}
	in.ID = in.id()
	return &in, nil
}

// id is the address's id. Records made before addresses had ids get one
// in the form of new ids (secret.go), from the creation time, stable
// across reads.
func (in *Inbound) id() string {
	if in.ID != "" {
		return in.ID
	}
	return strconv.FormatUint(uint64(in.CreatedAt.UnixMilli())<<16, 10)
}

// DeleteInbound removes the member's inbound secret record with id (the id
// InboundInfo shows): the URL stops working at once. ErrNotFound when the
// member has none with that id.
func (s *Store) DeleteInbound(ctx context.Context, memberID, id string) error {
	return s.Update(ctx, func(tx *Tx) error {
		var in Inbound
		if err := tx.getJSON(inboundKey(memberID), &in); err != nil {
			return err
		}
		if in.id() != id {
			return ErrNotFound
		}
		if err := tx.delete(inboundRefKey(in.Digest)); err != nil {
			return err
		}
		if err := tx.delete(inboundIDKey(in.id())); err != nil {
			return err
		}
		return tx.delete(inboundKey(memberID))
	})
}

// InboundMember returns the member whose inbound secret is secret
// (ErrNotFound, or ErrSuspended for a suspended member).
func (s *Store) InboundMember(ctx context.Context, secret string) (*Member, error) {
	if !strings.HasPrefix(secret, InboundPrefix) || len(secret) > 128 || len(secret) < 20 {
		return nil, ErrNotFound
	}
	var m *Member
	err := s.View(ctx, func(tx *Tx) error {
		id, err := tx.get(inboundRefKey(Digest(secret)))
		if err != nil {
			return err
		}
		m, err = tx.MemberByID(string(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Suspended {
		return nil, ErrSuspended
	}
	return m, nil
}

// InboundMemberByID returns the member whose current inbound address has
// the id (the local part of their newsletter e-mail address): ErrNotFound,
// or ErrSuspended for a suspended member. Addresses made before the id was
// indexed (records without an id, whose id InboundInfo derives) are found
// after IndexInboundIDs.
func (s *Store) InboundMemberByID(ctx context.Context, id string) (*Member, error) {
	if !isItemID(id) {
		return nil, ErrNotFound
	}
	var m *Member
	err := s.View(ctx, func(tx *Tx) error {
		mid, err := tx.get(inboundIDKey(id))
		if err != nil {
			return err
		}
		m, err = tx.MemberByID(string(mid))
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Suspended {
		return nil, ErrSuspended
	}
	return m, nil
}

// IndexInboundIDs indexes by id the inbound addresses that are not (made
// before the index, or with no id of their own): one pass over the
// addresses, each in a transaction of its own.
func (s *Store) IndexInboundIDs(ctx context.Context) error {
	var members []string
	prefix := key("gql", "inbound", "")
	err := s.View(ctx, func(tx *Tx) error {
		return tx.scan(prefix, nil, false, false, func(_, v []byte) (bool, error) {
			members = append(members, string(v))
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	for _, mid := range members {
		in, err := s.InboundInfo(ctx, mid)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		err = s.Update(ctx, func(tx *Tx) error {
			if _, err := tx.get(inboundIDKey(in.ID)); err == nil || !errors.Is(err, ErrNotFound) {
				return err
			}
			return tx.put(inboundIDKey(in.ID), []byte(mid), 0)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func init() {
	memberCleanups = append(memberCleanups, func(tx *Tx, memberID string) error {
		var refs [][]byte
		err := tx.scan(key("u", memberID, "gql", "tok", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var t APIToken
			if err := unmarshal(v, &t); err != nil {
				return false, err
			}
			refs = append(refs, apiTokenRefKey(t.Digest))
			return true, nil
		})
		if err != nil {
			return err
		}
		var in Inbound
		if err := tx.getJSON(inboundKey(memberID), &in); err == nil {
			refs = append(refs, inboundRefKey(in.Digest), inboundIDKey(in.id()))
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		for _, k := range refs {
			if err := tx.delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
