package agents

// NIP-05 names: an agent's claim of a name at a domain, its approval and
// release, one claimant per name.

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// nip05Claim is the identifier a claims ("" when it holds no claim).
func (a *Agent) nip05Claim() string {
	if a.NIP05Local == "" || !strings.Contains(a.NIP05, "@") {
		return ""
	}
	return a.NIP05
}

// nip05Claimant returns the pubkey holding the claim on id (name@domain), or
// storage.ErrNotFound. An older record keyed by the name alone counts only when its
// owner's registration still names id, so a claim made under another
// nip05_domain never answers for this one.
func nip05Claimant(tx *storage.Tx, id string) (string, error) {
	b, err := tx.Get(agentNameKey(id))
	if err == nil {
		return string(b), nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return "", err
	}
	name, _, ok := strings.Cut(id, "@")
	if !ok {
		return "", storage.ErrNotFound
	}
	b, err = tx.Get(agentNameKey(name))
	if err != nil {
		return "", err
	}
	var owner Agent
	if err := tx.GetJSON(agentKey(string(b)), &owner); err != nil {
		return "", err
	}
	if owner.nip05Claim() != id {
		return "", storage.ErrNotFound
	}
	return string(b), nil
}

// deleteIfOwner deletes the claim k when pubkey holds it.
func deleteIfOwner(tx *storage.Tx, k []byte, pubkey string) error {
	b, err := tx.Get(k)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil
	case err != nil:
		return err
	case string(b) != pubkey:
		return nil
	}
	return tx.Delete(k)
}

// Claim is a NIP-05 identifier held under one of the site's domains.
type Claim struct {
	// ID is the identifier, name@domain.
	ID       string `json:"id"`
	Pubkey   string `json:"pubkey"`
	Approved bool   `json:"approved"`
}

// NIP05Claim returns the claim on id (name@domain, lowercased) with whether
// the operator approved it; banned or unregistered agents give
// storage.ErrNotFound.
func (s Store) NIP05Claim(ctx context.Context, id string) (Claim, error) {
	c := Claim{ID: id}
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		if c.Pubkey, err = nip05Claimant(tx, id); err != nil {
			return err
		}
		if banned, err := tx.Has(agentBanKey(c.Pubkey)); err != nil || banned {
			if err == nil {
				err = storage.ErrNotFound
			}
			return err
		}
		var a Agent
		if err := tx.GetJSON(agentKey(c.Pubkey), &a); err != nil {
			return err
		}
		c.Approved = a.NIP05Approved && a.nip05Claim() == id
		return nil
	})
	return c, err
}

// NIP05Claims lists the claims on identifiers under domain, by name.
func (s Store) NIP05Claims(ctx context.Context, domain string) ([]Claim, error) {
	var out []Claim
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		prefix := storage.Key("agent", "nip05", "")
		seen := map[string]bool{}
		var ids []string
		if err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			id := string(k[len(prefix):])
			if !strings.Contains(id, "@") {
				id += "@" + domain // an older record: checked by nip05Claimant below
			}
			if strings.HasSuffix(id, "@"+domain) && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
			return true, nil
		}); err != nil {
			return err
		}
		sort.Strings(ids)
		for _, id := range ids {
			pk, err := nip05Claimant(tx, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			var a Agent
			if err := tx.GetJSON(agentKey(pk), &a); errors.Is(err, storage.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			out = append(out, Claim{ID: id, Pubkey: pk, Approved: a.NIP05Approved && a.nip05Claim() == id})
		}
		return nil
	})
	return out, err
}

// ApproveNIP05 approves the claim on id (name@domain) for the agent that
// holds it, and returns that agent's pubkey; storage.ErrNotFound when
// nobody holds it.
func (s Store) ApproveNIP05(ctx context.Context, id string, now time.Time) (string, error) {
	var pk string
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var err error
		if pk, err = nip05Claimant(tx, id); err != nil {
			return err
		}
		var a Agent
		if err := tx.GetJSON(agentKey(pk), &a); err != nil {
			return err
		}
		if a.nip05Claim() != id {
			return storage.ErrNotFound
		}
		a.NIP05Approved, a.NIP05Verified = true, true
		a.NIP05CheckedAt, a.NIP05OKAt = now.Unix(), now.Unix()
		return tx.PutJSON(agentKey(pk), &a, 0)
	})
	return pk, err
}

// ReleaseNIP05 frees the name id (name@domain): whoever holds it loses the
// claim (and its approval), so another agent may claim it. It returns the
// pubkey that held it; storage.ErrNotFound when nobody did.
func (s Store) ReleaseNIP05(ctx context.Context, id string) (string, error) {
	var pk string
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var err error
		if pk, err = nip05Claimant(tx, id); err != nil {
			return err
		}
		return releaseClaims(tx, pk, id)
	})
	return pk, err
}

// releaseClaims deletes the claims pubkey holds (on id, and on whatever its
// registration names) and clears them from its registration.
func releaseClaims(tx *storage.Tx, pubkey, id string) error {
	if id != "" {
		if err := deleteIfOwner(tx, agentNameKey(id), pubkey); err != nil {
			return err
		}
	}
	var a Agent
	switch err := tx.GetJSON(agentKey(pubkey), &a); {
	case errors.Is(err, storage.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	if a.NIP05Local == "" {
		return nil
	}
	if c := a.nip05Claim(); c != "" {
		if err := deleteIfOwner(tx, agentNameKey(c), pubkey); err != nil {
			return err
		}
	}
	if err := deleteIfOwner(tx, agentNameKey(a.NIP05Local), pubkey); err != nil {
		return err
	}
	a.NIP05Local, a.NIP05Approved, a.NIP05Verified = "", false, false
	return tx.PutJSON(agentKey(pubkey), &a, 0)
}
