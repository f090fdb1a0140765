package members

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Passkeys (WebAuthn credentials): a member's public keys, each made by an
// authenticator (a phone, a security key, a password manager) for this
// site's host. They are kept under the member's prefix, named by their
// credential id; the user handle the authenticator keeps with a
// discoverable credential is the member's id, so a sign-in without a
// username finds the member from the handle. Registering or removing one
// is a change of credentials: it renews the security stamp (renewStamp) in
// the same transaction, as a password change does.

// Passkey is one of a member's WebAuthn credentials.
type Passkey struct {
	// ID is the credential id, unpadded base64url (as WebAuthn's JSON
	// carries it).
	ID         string              `json:"id"`
	Name       string              `json:"name"`
	CreatedAt  time.Time           `json:"created_at"`
	LastUsedAt time.Time           `json:"last_used_at,omitzero"`
	Credential webauthn.Credential `json:"credential"`
}

// Bounds of a member's passkeys.
const (
	MaxPasskeysPerMember = 20
	MaxPasskeyNameLen    = 40
	// PasskeyCeremonyLifetime bounds the time between the options a
	// browser gets and the answer of its authenticator.
	PasskeyCeremonyLifetime = 5 * time.Minute
	// PasskeyCeremonyPrefix starts the secret naming a ceremony in flight.
	PasskeyCeremonyPrefix = "hwa_"
)

// Errors of the passkey operations.
var (
	ErrPasskeyNotFound = errors.New("no such passkey")
	ErrTooManyPasskeys = errors.New("this account has as many passkeys as it may have: remove one first")
	ErrPasskeyExists   = errors.New("this passkey is already registered")
)

func passkeyKey(memberID, id string) []byte { return storage.Key("u", memberID, "passkey", id) }
func passkeysPrefix(memberID string) []byte { return storage.Key("u", memberID, "passkey", "") }
func ceremonyKey(digest string) []byte      { return storage.Key("webauthn", "ceremony", digest) }

// PasskeyID is the name of a credential id in the store.
func PasskeyID(credentialID []byte) string {
	return base64.RawURLEncoding.EncodeToString(credentialID)
}

// PasskeyName is name made fit to show: trimmed, clipped to
// MaxPasskeyNameLen characters on one line, "Passkey" when empty.
func PasskeyName(name string) string {
	name = strings.TrimSpace(clip(name, 4*MaxPasskeyNameLen))
	if utf8.RuneCountInString(name) > MaxPasskeyNameLen {
		name = string([]rune(name)[:MaxPasskeyNameLen])
	}
	if name == "" {
		return "Passkey"
	}
	return name
}

// Passkeys returns memberID's passkeys, oldest first.
func (s Store) Passkeys(ctx context.Context, memberID string) ([]Passkey, error) {
	var out []Passkey
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		out, err = passkeysOf(tx, memberID)
		return err
	})
	return out, err
}

func passkeysOf(tx *storage.Tx, memberID string) ([]Passkey, error) {
	var out []Passkey
	err := tx.Scan(passkeysPrefix(memberID), nil, false, false, func(_, v []byte) (bool, error) {
		var pk Passkey
		if err := json.Unmarshal(v, &pk); err != nil {
			return false, err
		}
		out = append(out, pk)
		return true, nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, err
}

// AddPasskey registers cred for m, as read when the ceremony started (a
// change of credentials since refuses it: ErrCredentialsChanged), named
// name, and renews m's security stamp: every other web session of the
// member ends, except the one whose cookie secret is keepSession (the
// browser that registered it).
func (s Store) AddPasskey(ctx context.Context, m *Member, name string, cred webauthn.Credential, keepSession string) (*Passkey, error) {
	pk := &Passkey{ID: PasskeyID(cred.ID), Name: PasskeyName(name), CreatedAt: time.Now().UTC(), Credential: cred}
	keep := keptDigest(keepSession)
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		cur, err := CheckStamp(tx, m)
		if err != nil {
			return err
		}
		have, err := tx.Suffixes(passkeysPrefix(m.ID))
		if err != nil {
			return err
		}
		if len(have) >= MaxPasskeysPerMember {
			return ErrTooManyPasskeys
		}
		if taken, err := tx.Has(passkeyKey(m.ID, pk.ID)); err != nil {
			return err
		} else if taken {
			return ErrPasskeyExists
		}
		if err := tx.PutJSON(passkeyKey(m.ID, pk.ID), pk, 0); err != nil {
			return err
		}
		_, err = renewStamp(tx, cur, keep)
		return err
	})
	if err != nil {
		return nil, err
	}
	return pk, nil
}

// RenamePasskey names memberID's passkey id (not a change of credentials).
func (s Store) RenamePasskey(ctx context.Context, memberID, id, name string) error {
	return s.updatePasskey(ctx, memberID, id, func(pk *Passkey) { pk.Name = PasskeyName(name) })
}

// updatePasskey changes memberID's passkey id with change in one
// transaction; ErrPasskeyNotFound when there is none.
func (s Store) updatePasskey(ctx context.Context, memberID, id string, change func(*Passkey)) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var pk Passkey
		if err := tx.GetJSON(passkeyKey(memberID, id), &pk); errors.Is(err, storage.ErrNotFound) {
			return ErrPasskeyNotFound
		} else if err != nil {
			return err
		}
		change(&pk)
		return tx.PutJSON(passkeyKey(memberID, id), pk, 0)
	})
}

// RemovePasskey removes memberID's passkey id and renews the member's
// security stamp, ending its web sessions except the one whose cookie
// secret is keepSession (the browser that removed it).
func (s Store) RemovePasskey(ctx context.Context, memberID, id, keepSession string) error {
	keep := keptDigest(keepSession)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByID(tx, memberID)
		if err != nil {
			return err
		}
		if has, err := tx.Has(passkeyKey(memberID, id)); err != nil {
			return err
		} else if !has {
			return ErrPasskeyNotFound
		}
		if err := tx.Delete(passkeyKey(memberID, id)); err != nil {
			return err
		}
		_, err = renewStamp(tx, m, keep)
		return err
	})
}

// PasskeyUsed records a sign-in with cred (its signature counter and
// flags as the authenticator last reported them, and when).
func (s Store) PasskeyUsed(ctx context.Context, memberID string, cred webauthn.Credential) error {
	return s.updatePasskey(ctx, memberID, PasskeyID(cred.ID), func(pk *Passkey) {
		pk.Credential.Authenticator = cred.Authenticator
		pk.Credential.Flags = cred.Flags
		pk.LastUsedAt = time.Now().UTC().Truncate(time.Second)
	})
}

// PasskeyCeremony is what the server keeps between the options it sends
// and the authenticator's answer: the library's session data (the
// challenge), what the ceremony is for, and the member it is for (with its
// stamp then), when one is known.
type PasskeyCeremony struct {
	Purpose  string               `json:"purpose"`
	MemberID string               `json:"member_id,omitempty"`
	Stamp    string               `json:"stamp,omitempty"`
	Data     webauthn.SessionData `json:"data"`
}

// StartPasskeyCeremony keeps c for PasskeyCeremonyLifetime and returns the
// secret naming it (the browser keeps it in a cookie).
func (s Store) StartPasskeyCeremony(ctx context.Context, c PasskeyCeremony) (string, error) {
	secret := storage.NewSecret(PasskeyCeremonyPrefix, 32)
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		return tx.PutJSON(ceremonyKey(storage.Digest(secret)), c, PasskeyCeremonyLifetime)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// TakePasskeyCeremony returns the ceremony named by secret for purpose and
// ends it (an answer is checked once), or storage.ErrNotFound.
func (s Store) TakePasskeyCeremony(ctx context.Context, secret, purpose string) (*PasskeyCeremony, error) {
	if !strings.HasPrefix(secret, PasskeyCeremonyPrefix) || len(secret) > 128 {
		return nil, storage.ErrNotFound
	}
	var c PasskeyCeremony
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		k := ceremonyKey(storage.Digest(secret))
		if err := tx.GetJSON(k, &c); err != nil {
			return err
		}
		return tx.Delete(k)
	})
	if err != nil {
		return nil, err
	}
	if c.Purpose != purpose {
		return nil, storage.ErrNotFound
	}
	return &c, nil
}
