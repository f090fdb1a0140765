package storage

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"sync"
	"time"
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

var idState struct {
	sync.Mutex
	last uint64
}

// NewID returns a decimal, time-ordered identifier in Mastodon's style
// (milliseconds since the epoch shifted left 16 bits, plus a sequence), unique
// within the process and increasing.
func NewID() string {
	return strconv.FormatUint(newIDAt(time.Now()), 10)
}

func newIDAt(t time.Time) uint64 {
	var r [2]byte
	_, _ = rand.Read(r[:])
	id := uint64(t.UnixMilli())<<16 | uint64(binary.BigEndian.Uint16(r[:]))
	idState.Lock()
	if id <= idState.last {
		id = idState.last + 1
	}
	idState.last = id
	idState.Unlock()
	return id
}
