// Package agentstest makes up registered agents for the directory's
// benchmarks (bench/dirbench and handlers/directory's): random keys and
// realistic field sizes, written straight to the store. No signature is
// made: the document does not check them.
package agentstest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// RandomHex is n random bytes in hex: a made-up key, event id or signature.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Agent is the made-up agent number i, registered at reg (Unix seconds)
// with a random pubkey, by an event whose tags are the JSON array tags.
func Agent(i int, reg int64, tags string) *agents.Agent {
	pk := RandomHex(32)
	return &agents.Agent{
		Pubkey:            pk,
		Name:              fmt.Sprintf("agent %d", i),
		Purpose:           "Summarizes the day's papers on distributed systems and answers questions about them.",
		Capabilities:      []string{"summarize", "search", "reply"},
		Operator:          "operator@example.org",
		PowBits:           i % 24,
		FirstRegisteredAt: reg,
		RegisteredAt:      reg,
		RegistrationEvent: RandomHex(32),
		UpdatedAt:         reg,
		Event: json.RawMessage(`{"id":"` + RandomHex(32) + `","pubkey":"` + pk + `","created_at":` +
			strconv.FormatInt(reg, 10) + `,"kind":31339,"tags":` + tags + `,"content":"","sig":"` + RandomHex(64) + `"}`),
	}
}
