package grants

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
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

// SigningKey is one generation of the keyring: an RSA key (RS256, the
// default every relying party accepts) and an ECDSA P-256 key (ES256, for
// the clients that ask for it: its signature costs a small fraction of an
// RSA one), which rotate together.
type SigningKey struct {
	ID        string    `json:"kid"`
	PKCS8     []byte    `json:"pkcs8"`
	EC        []byte    `json:"ec,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	SignsFrom time.Time `json:"signs_from"`

	private *rsa.PrivateKey
	ec      *ecdsa.PrivateKey
}

// Private is the RSA key's private half.
func (k *SigningKey) Private() *rsa.PrivateKey { return k.private }

// ECPrivate is the ECDSA key's private half, nil for a key made before
// there were any.
func (k *SigningKey) ECPrivate() *ecdsa.PrivateKey { return k.ec }

// ECKeyID is the ECDSA key's kid: the generation's, with a suffix.
func (k *SigningKey) ECKeyID() string { return k.ID + "-es256" }

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

// keyringCache keeps the keyring decoded on each node; a write of it (a
// rotation on any node) drops it everywhere (storage.RecordCache).
var keyringCache = storage.NewCacheKind[keyring](keyringKey())

// parsedKeys are the private keys parsed from their PKCS #8 form, by kid:
// a key is parsed once per process, not on every signature.
var parsedKeys sync.Map // kid -> *rsa.PrivateKey

// SigningKeys returns the keys to sign and publish with under policy,
// creating the first key or a successor when one is due.
func (s Store) SigningKeys(ctx context.Context, policy KeyPolicy) (*Keys, error) {
	c := keyringCache.Of(s.st)
	gen := c.Generation()
	ring := c.Get("")
	if ring == nil {
		ring = new(keyring)
		err := s.st.View(ctx, func(tx *storage.Tx) error { return readKeyring(tx, ring) })
		if err != nil {
			return nil, err
		}
		if len(ring.Keys) > 0 {
			c.Add(gen, "", ring)
		}
	}
	if ring.needsChange(now(), policy) {
		return s.changeKeys(ctx, policy, false)
	}
	return ring.keys(now())
}

func readKeyring(tx *storage.Tx, ring *keyring) error {
	*ring = keyring{}
	err := tx.GetJSON(keyringKey(), ring)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}

// RotateSigningKey publishes a successor now, which signs from
// PublishAhead on (replacing a successor not yet signing): for an operator
// who suspects a key, or who wants to see rotation happen.
func (s Store) RotateSigningKey(ctx context.Context, policy KeyPolicy) (*Keys, error) {
	return s.changeKeys(ctx, policy, true)
}

// keyGeneration lets one change of the keyring at a time run on this node:
// when a rotation falls due, every request that needs the keys (the JWKS,
// userinfo, a new code) finds it due, and each would otherwise generate an
// RSA key, the slowest step, of which the transaction keeps one. A caller
// that waited reads the ring its predecessor committed instead. Nodes
// apart may still each generate one; the transaction still keeps one.
var keyGeneration = make(chan struct{}, 1)

// generateSigningKey makes a new generation of keys (a variable so that
// a test can count the generations).
var generateSigningKey = newSigningKey

// changeKeys applies policy (and rotate) to the stored keyring in a
// transaction, so that two nodes never add two successors.
func (s Store) changeKeys(ctx context.Context, policy KeyPolicy, rotate bool) (*Keys, error) {
	select {
	case keyGeneration <- struct{}{}:
		defer func() { <-keyGeneration }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var ring keyring
	if !rotate {
		if err := s.st.View(ctx, func(tx *storage.Tx) error { return readKeyring(tx, &ring) }); err != nil {
			return nil, err
		}
		if !ring.needsChange(now(), policy) {
			return ring.keys(now())
		}
	}
	// Key generation happens outside the transaction (it takes a while);
	// the transaction decides whether it is still needed.
	fresh, err := generateSigningKey()
	if err != nil {
		return nil, err
	}
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := readKeyring(tx, &ring); err != nil {
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
	si := r.signer(t)
	for i, k := range r.Keys {
		pk, ec, err := parsedKey(k)
		if err != nil {
			return nil, err
		}
		// A copy: the keyring may be the cache's, shared by every request.
		kc := *k
		kc.private, kc.ec = pk, ec
		out.Published = append(out.Published, &kc)
		if i == si {
			out.Signer = &kc
		}
	}
	if out.Signer == nil {
		return nil, errors.New("no OpenID signing key is in force")
	}
	return out, nil
}

type parsed struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func parsedKey(k *SigningKey) (*rsa.PrivateKey, *ecdsa.PrivateKey, error) {
	if p, ok := parsedKeys.Load(k.ID); ok {
		return p.(parsed).rsa, p.(parsed).ec, nil
	}
	pk, err := x509.ParsePKCS8PrivateKey(k.PKCS8)
	if err != nil {
		return nil, nil, fmt.Errorf("read OpenID signing key %s: %w", k.ID, err)
	}
	rk, ok := pk.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("OpenID signing key %s is not an RSA key", k.ID)
	}
	var ek *ecdsa.PrivateKey
	if len(k.EC) > 0 {
		pk, err := x509.ParsePKCS8PrivateKey(k.EC)
		if err != nil {
			return nil, nil, fmt.Errorf("read OpenID signing key %s: %w", k.ECKeyID(), err)
		}
		if ek, ok = pk.(*ecdsa.PrivateKey); !ok {
			return nil, nil, fmt.Errorf("OpenID signing key %s is not an ECDSA key", k.ECKeyID())
		}
	}
	parsedKeys.Store(k.ID, parsed{rk, ek})
	return rk, ek, nil
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
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ek)
	if err != nil {
		return nil, err
	}
	return &SigningKey{ID: storage.NewSecret("", 12), PKCS8: der, EC: ecDER, CreatedAt: now().UTC()}, nil
}
