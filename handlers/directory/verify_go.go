//go:build !libsecp256k1

package directory

import (
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"
)

// verifySignature checks evt's BIP-340 signature of hash (its id) with
// btcec (pure Go, what go-nostr uses by default), the pubkey's point from
// pubkeys. The verification itself is two scalar multiplications in field
// arithmetic (nearly all of a check's time in a CPU profile); the
// libsecp256k1 build tag replaces it with C several times faster.
func verifySignature(evt *nostr.Event, hash *[32]byte) bool {
	pk, sig, ok := decodeKeyAndSig(evt.PubKey, evt.Sig)
	if !ok {
		return false
	}
	key, err := pubkeys.get(&pk, func(raw *[32]byte) (*btcec.PublicKey, error) { return schnorr.ParsePubKey(raw[:]) })
	if err != nil {
		return false
	}
	s, err := schnorr.ParseSignature(sig[:])
	return err == nil && s.Verify(hash[:], key)
}

var pubkeys pubkeyCache[*btcec.PublicKey]
