//go:build !libsecp256k1

package directory

import (
	"encoding/hex"
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"
)

// verifySignature checks evt's BIP-340 signature of hash (its id) with btcec (pure Go, what go-nostr uses by default). The pubkey's
// point comes from pubkeys when it was parsed before: parsing it solves a
// square root, a fifth or so of a check, and the same agents post again and
// again. The verification itself is two scalar multiplications in field
// arithmetic (nearly all of a check's time in a CPU profile); the
// libsecp256k1 build tag replaces it with C several times faster.
func verifySignature(evt *nostr.Event, hash *[32]byte) bool {
	var pk [32]byte
	var sig [schnorr.SignatureSize]byte
	if len(evt.PubKey) != 2*len(pk) || len(evt.Sig) != 2*len(sig) {
		return false
	}
	if _, err := hex.Decode(pk[:], []byte(evt.PubKey)); err != nil {
		return false
	}
	if _, err := hex.Decode(sig[:], []byte(evt.Sig)); err != nil {
		return false
	}
	key, err := pubkeys.get(&pk)
	if err != nil {
		return false
	}
	s, err := schnorr.ParseSignature(sig[:])
	return err == nil && s.Verify(hash[:], key)
}

// pubkeyCache holds parsed pubkeys, up to maxPubkeys: past that it starts
// again empty (a bounded cost, and the agents posting now come back first).
type pubkeyCache struct {
	mu sync.RWMutex
	m  map[[32]byte]*btcec.PublicKey
}

const maxPubkeys = 1 << 16

var pubkeys pubkeyCache

func (c *pubkeyCache) get(raw *[32]byte) (*btcec.PublicKey, error) {
	c.mu.RLock()
	pk, ok := c.m[*raw]
	c.mu.RUnlock()
	if ok {
		return pk, nil
	}
	pk, err := schnorr.ParsePubKey(raw[:])
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxPubkeys {
		c.m = make(map[[32]byte]*btcec.PublicKey)
	}
	c.m[*raw] = pk
	c.mu.Unlock()
	return pk, nil
}
