package members

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
)

// argonCost is argon2id's time (passes) and memory (KiB) for new hashes.
type argonCost struct{ time, memory uint32 }

// argonServed is the cost of every hash a server makes: RFC 9106's second
// recommended option, with memory lowered to 19 MiB (OWASP's minimum for
// argon2id) to suit small servers.
var argonServed = argonCost{time: 2, memory: 19 * 1024}

// argonInTests is the cost of the hashes a test binary makes: the least
// argon2id takes, as Devise's generated configuration sets bcrypt's
// stretches to 1 in a Rails test environment: tests create members and
// sign in thousands of times, and at the served cost argon2id took 62 %
// of handlers/account's test run (4 times more under the race
// detector). A hash records its cost, so CheckPassword checks either; the
// real clients' suites run a built server, which hashes at argonServed.
var argonInTests = argonCost{time: 1, memory: 8}

const (
	argonThreads = 1
	argonKeyLen  = 32
)

// HashPassword returns an encoded argon2id hash of password.
func HashPassword(password string) string {
	if testing.Testing() {
		return hashPassword(password, argonInTests)
	}
	return hashPassword(password, argonServed)
}

func hashPassword(password string, c argonCost) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	key := argon2.IDKey([]byte(password), salt, c.time, c.memory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, c.memory, c.time, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// CheckPassword reports whether password matches an encoded hash made by
// HashPassword.
func CheckPassword(encoded, password string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	// The parameters come from our own store, but a damaged record must
	// not panic argon2 (t or p of 0) or make it allocate without bound.
	if err1 != nil || err2 != nil || len(want) == 0 || t < 1 || p < 1 || m > 1<<21 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is checked against when a username does not exist, so that a
// sign-in takes as long for unknown names as for wrong passwords.
var dummyHash = HashPassword("hearth-dummy-password")
