package directory

import (
	"encoding/hex"
	"sync"
)

// pubkeyCache holds parsed pubkeys (the library's own form of a point), up
// to maxPubkeys: past that it starts again empty (a bounded cost, and the
// agents posting now come back first). Parsing a pubkey solves a square
// root, a tenth to a fifth of a signature check, and the same agents post
// again and again.
type pubkeyCache[K any] struct {
	mu sync.RWMutex
	m  map[[32]byte]K
}

const maxPubkeys = 1 << 16

// get returns the parsed form of raw, from the cache or from parse.
func (c *pubkeyCache[K]) get(raw *[32]byte, parse func(raw *[32]byte) (K, error)) (K, error) {
	c.mu.RLock()
	pk, ok := c.m[*raw]
	c.mu.RUnlock()
	if ok {
		return pk, nil
	}
	pk, err := parse(raw)
	if err != nil {
		return pk, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxPubkeys {
		c.m = make(map[[32]byte]K)
	}
	c.m[*raw] = pk
	c.mu.Unlock()
	return pk, nil
}

// decodeKeyAndSig decodes evt's pubkey and signature from hex (DecodeEvent
// checked their lengths; an event built otherwise is checked here).
func decodeKeyAndSig(pubkey, sig string) (pk [32]byte, s [64]byte, ok bool) {
	if len(pubkey) != 2*len(pk) || len(sig) != 2*len(s) {
		return pk, s, false
	}
	if _, err := hex.Decode(pk[:], []byte(pubkey)); err != nil {
		return pk, s, false
	}
	if _, err := hex.Decode(s[:], []byte(sig)); err != nil {
		return pk, s, false
	}
	return pk, s, true
}
