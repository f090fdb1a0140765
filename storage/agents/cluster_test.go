package agents

import (
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// twoNodes is this package's PostgreSQL server for two nodes of one site
// (stopped by TestMain).
var twoNodes = storagetest.NewPostgres(15442)

// Bans and suspensions are records read from the store by every node (the
// agents' ban is never cached; a member's suspension goes through the
// member cache, TestClusterRevokedTokenRefusedOnEveryNode): an agent
// banned on A is banned on B at once, and B refuses its registration.
func TestClusterAgentBanHoldsOnEveryNode(t *testing.T) {
	sa, sb := twoNodes.TwoNodes(t)
	a, b := Of(sa), Of(sb)
	if _, err := b.Register(t.Context(), &Agent{Pubkey: agentPK1, Name: "one"}, func(*Agent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Ban(t.Context(), agentPK1, "spam", time.Now()); err != nil {
		t.Fatal(err)
	}
	if banned, err := b.Banned(t.Context(), agentPK1); err != nil || !banned {
		t.Fatalf("B: banned %v, %v", banned, err)
	}
	if _, err := b.Register(t.Context(), &Agent{Pubkey: agentPK1, Name: "again"}, func(*Agent) error { return nil }); !errors.Is(err, ErrAgentBanned) {
		t.Fatalf("registration on B after the ban on A: %v, want ErrAgentBanned", err)
	}
}
