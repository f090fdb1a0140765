package grants

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// The OpenID provider's signing keys live in the store, one record for all
// of them, so that they survive restarts and reloads, come along in
// backups, and every node of a cluster signs with and publishes the same
// keys. A key is published (in the JWKS) from its creation, signs from
// SignsFrom, and is dropped once the tokens it signed have expired:
//
//	created ── published ──► SignsFrom ── signs ──► successor's SignsFrom ── Retain ──► dropped
//
// Rotation is lazy: the node that needs the keys and finds the signer due
// for a successor adds one, in a transaction, so two nodes never add two.
//
// Keys:
//
//	oauth/oidc/keys   keyring

// KeyPolicy is when keys rotate.
type KeyPolicy struct {
	// Rotation is how long a key signs before its successor takes over.
	Rotation time.Duration
	// PublishAhead is how long a successor is published before it signs,
	// so relying parties that cache the JWKS know it before they meet it.
	PublishAhead time.Duration
	// Retain is how long a key stays published after its last signature:
	// the lifetime of what it signed.
	Retain time.Duration
}

// SigningKey is one RSA key of the keyring.
type SigningKey struct {
	ID        string    `json:"kid"`
	PKCS8     []byte    `json:"pkcs8"`
	CreatedAt time.Time `json:"created_at"`
	SignsFrom time.Time `json:"signs_from"`

	private *rsa.PrivateKey
}

// Private is the key's private half.
func (k *SigningKey) Private() *rsa.PrivateKey { return k.private }

type keyring struct {
	Keys []*SigningKey `json:"keys"`
	// Salt keys the pairwise subject identifiers (PairwiseSalt).
	Salt string `json:"salt"`
}

// Keys is the keyring as a node uses it: the key that signs now and every
// key to publish.
type Keys struct {
	Signer    *SigningKey
	Published []*SigningKey
	Salt      string
}

func keyringKey() []byte { return storage.Key("oauth", "oidc", "keys") }

// keyCacheTTL is how long a node uses the keyring it read before reading
// it again. A successor is published PublishAhead before it signs, so a
// node that signs a little longer with its predecessor does no harm.
const keyCacheTTL = 5 * time.Second

var keyCache = struct {
	sync.Mutex
	by map[*storage.Store]cachedKeys
}{by: map[*storage.Store]cachedKeys{}}

type cachedKeys struct {
	keys   *Keys
	policy KeyPolicy
	read   time.Time
}

// SigningKeys returns the keys to sign and publish with under policy,
// creating the first key or a successor when one is due.
func (s Store) SigningKeys(ctx context.Context, policy KeyPolicy) (*Keys, error) {
	keyCache.Lock()
	c, ok := keyCache.by[s.st]
	keyCache.Unlock()
	t := now()
	if ok && c.policy == policy && t.Sub(c.read) < keyCacheTTL && t.Before(c.read.Add(keyCacheTTL)) && !c.dueAt(t) {
		return c.keys, nil
	}
	keys, err := s.loadKeys(ctx, policy, false)
	if err != nil {
		return nil, err
	}
	keyCache.Lock()
	keyCache.by[s.st] = cachedKeys{keys: keys, policy: policy, read: t}
	keyCache.Unlock()
	return keys, nil
}

// dueAt reports whether a published successor starts signing by t: the
// cached signer is then stale.
func (c cachedKeys) dueAt(t time.Time) bool {
	for _, k := range c.keys.Published {
		if k.SignsFrom.After(c.keys.Signer.SignsFrom) && !t.Before(k.SignsFrom) {
			return true
		}
	}
	return false
}

// RotateSigningKey publishes a successor now, which signs from
// PublishAhead on (replacing a successor not yet signing): for an operator
// who suspects a key, or who wants to see rotation happen.
func (s Store) RotateSigningKey(ctx context.Context, policy KeyPolicy) (*Keys, error) {
	keys, err := s.loadKeys(ctx, policy, true)
	if err == nil {
		keyCache.Lock()
		delete(keyCache.by, s.st)
		keyCache.Unlock()
	}
	return keys, err
}

// ForgetKeyCache drops this node's cached keyring (after a restore).
func (s Store) ForgetKeyCache() {
	keyCache.Lock()
	delete(keyCache.by, s.st)
	keyCache.Unlock()
}

func (s Store) loadKeys(ctx context.Context, policy KeyPolicy, rotate bool) (*Keys, error) {
	var ring keyring
	read := func(tx *storage.Tx) error {
		ring = keyring{}
		err := tx.GetJSON(keyringKey(), &ring)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	}
	if err := s.st.View(ctx, read); err != nil {
		return nil, err
	}
	if rotate || ring.needsChange(now(), policy) {
		// Key generation happens outside the transaction (it takes a while);
		// the transaction decides whether it is still needed.
		fresh, err := newSigningKey()
		if err != nil {
			return nil, err
		}
		err = s.st.Update(ctx, func(tx *storage.Tx) error {
			if err := read(tx); err != nil {
				return err
			}
			if !ring.change(now(), policy, fresh, rotate) {
				return nil
			}
			return tx.PutJSON(keyringKey(), ring, 0)
		})
		if err != nil {
			return nil, fmt.Errorf("rotate the OpenID signing keys: %w", err)
		}
	}
	return ring.keys(now())
}

// signer is the index of the key that signs at t, or -1.
func (r *keyring) signer(t time.Time) int {
	best := -1
	for i, k := range r.Keys {
		if !t.Before(k.SignsFrom) && (best < 0 || k.SignsFrom.After(r.Keys[best].SignsFrom)) {
			best = i
		}
	}
	return best
}

func (r *keyring) needsChange(t time.Time, p KeyPolicy) bool {
	cp := keyring{Keys: append([]*SigningKey(nil), r.Keys...), Salt: r.Salt}
	return cp.change(t, p, nil, false)
}

// change applies policy at t: a first key, a successor when the signer is
// within PublishAhead of its end (or rotate), the removal of keys whose
// tokens have expired. fresh is the key to add (nil: only report). It
// reports whether the ring changed.
func (r *keyring) change(t time.Time, p KeyPolicy, fresh *SigningKey, rotate bool) bool {
	changed := false
	if r.Salt == "" {
		r.Salt, changed = storage.NewSecret("", 32), true
	}
	si := r.signer(t)
	var pending *SigningKey
	for _, k := range r.Keys {
		if k.SignsFrom.After(t) {
			pending = k
		}
	}
	add := func(from time.Time) {
		changed = true
		if fresh == nil {
			return
		}
		fresh.SignsFrom = from
		if pending != nil {
			for i, k := range r.Keys {
				if k == pending {
					r.Keys = append(r.Keys[:i], r.Keys[i+1:]...)
					break
				}
			}
		}
		r.Keys = append(r.Keys, fresh)
	}
	switch {
	case si < 0:
		// The first key signs at once: no relying party can have cached a
		// key set without it.
		add(t)
	case rotate:
		add(t.Add(p.PublishAhead))
	case pending == nil && !t.Before(r.Keys[si].SignsFrom.Add(p.Rotation-p.PublishAhead)):
		from := r.Keys[si].SignsFrom.Add(p.Rotation)
		if min := t.Add(p.PublishAhead); from.Before(min) {
			from = min
		}
		add(from)
	}
	// A key stops signing when a later one starts; it goes once what it
	// signed has expired.
	keep := r.Keys[:0:0]
	for _, k := range r.Keys {
		var until time.Time
		for _, o := range r.Keys {
			if o.SignsFrom.After(k.SignsFrom) && !t.Before(o.SignsFrom) && (until.IsZero() || o.SignsFrom.Before(until)) {
				until = o.SignsFrom
			}
		}
		if !until.IsZero() && t.After(until.Add(p.Retain)) {
			changed = true
			continue
		}
		keep = append(keep, k)
	}
	r.Keys = keep
	return changed
}

// keys parses the ring's keys for use at t.
func (r *keyring) keys(t time.Time) (*Keys, error) {
	out := &Keys{Salt: r.Salt}
	for _, k := range r.Keys {
		pk, err := x509.ParsePKCS8PrivateKey(k.PKCS8)
		if err != nil {
			return nil, fmt.Errorf("read OpenID signing key %s: %w", k.ID, err)
		}
		rk, ok := pk.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("OpenID signing key %s is not an RSA key", k.ID)
		}
		k.private = rk
		out.Published = append(out.Published, k)
	}
	if i := r.signer(t); i >= 0 {
		out.Signer = r.Keys[i]
	}
	if out.Signer == nil {
		return nil, errors.New("no OpenID signing key is in force")
	}
	return out, nil
}

func newSigningKey() (*SigningKey, error) {
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(pk)
	if err != nil {
		return nil, err
	}
	return &SigningKey{ID: storage.NewSecret("", 12), PKCS8: der, CreatedAt: now().UTC()}, nil
}
