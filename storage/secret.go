package storage

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// NewSecret returns prefix followed by n random bytes in unpadded base64url:
// the one generator for tokens, client secrets, codes and session ids.
func NewSecret(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // rand.Read never fails on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Digest is the form in which secrets are stored and looked up: the hex
// SHA-256 of the secret. Secrets are high-entropy random values, so a fast
// hash is enough; passwords use HashPassword instead.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretMatches reports, in constant time, whether secret's digest is digest.
func SecretMatches(secret, digest string) bool {
	d := Digest(secret)
	return subtle.ConstantTimeCompare([]byte(d), []byte(digest)) == 1
}

// Ids are decimal, time-ordered numbers in Mastodon's style: milliseconds
// since the epoch shifted left 16 bits, then the node's id slot (6 bits,
// kv.IDSlots: 0 with Badger, a slot held by this process among the nodes
// of a shared engine) and a sequence (10 bits). Ids made by two nodes can
// never be equal; one node's are increasing (past 1024 in a millisecond it
// takes the next one). Ids made before (milliseconds << 16 plus 16 random
// bits) stay valid: they are ordinary numbers of the same form, and
// creations check that the key of a new id is absent (Tx.freshID), so a
// clock stepping back cannot overwrite a record.
const (
	idSeqBits  = 10
	idSlotBits = 6
)

// idGen makes the ids of one store.
type idGen struct {
	mu   sync.Mutex
	slot int // of the last id, -1 before the first
	ms   uint64
	seq  uint64
}

func newIDGen() *idGen { return &idGen{slot: -1} }

// next returns the next id of slot at now.
func (g *idGen) next(now time.Time, slot uint16) uint64 {
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	defer g.mu.Unlock()
	if int(slot) != g.slot {
		g.slot, g.ms, g.seq = int(slot), 0, 0
	}
	switch {
	case ms > g.ms:
		g.ms, g.seq = ms, 0
	case g.seq+1 < 1<<idSeqBits:
		g.seq++
	default:
		g.ms, g.seq = g.ms+1, 0
	}
	return g.ms<<(idSlotBits+idSeqBits) | uint64(slot)<<idSeqBits | g.seq
}

// errNoIDSlot: the engine cannot prove this node holds its id slot now
// (update claims one again, outside the transaction, and runs it again).
var errNoIDSlot = fmt.Errorf("%w: this node holds no id slot now", kv.ErrUnavailable)

// newID returns a new id (see idGen) for a record of this transaction.
func (tx *Tx) newID() (string, error) {
	if tx.w == nil || tx.st == nil {
		return "", errReadOnly
	}
	var slot uint16
	if sl := tx.st.slots; sl != nil {
		var ok bool
		if slot, ok = sl.HeldIDSlot(); !ok {
			return "", errNoIDSlot
		}
	}
	return strconv.FormatUint(tx.st.ids.next(tx.st.idClock(), slot), 10), nil
}

// freshID returns a new id whose record key keyOf(id) is absent: a
// creation never overwrites a record, whatever the clocks did. Another
// transaction creating the same key at once conflicts with this one.
func (tx *Tx) freshID(keyOf func(id string) []byte) (string, error) {
	for range 8 {
		id, err := tx.newID()
		if err != nil {
			return "", err
		}
		taken, err := tx.has(keyOf(id))
		if err != nil {
			return "", err
		}
		if !taken {
			return id, nil
		}
	}
	return "", errors.New("storage: every new id tried is taken")
}

// idClock is the time of new ids (tests set Store.idNow).
func (s *Store) idClock() time.Time {
	if s.idNow != nil {
		return s.idNow()
	}
	return time.Now()
}
