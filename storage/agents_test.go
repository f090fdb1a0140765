package storage

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	agentPK1 = strings.Repeat("1", 64)
	agentPK2 = strings.Repeat("2", 64)
)

func registerTestAgent(t *testing.T, st *Store, a *Agent) bool {
	t.Helper()
	created, err := st.RegisterAgent(a, func(*Agent) error { return nil })
	if err != nil {
		t.Fatalf("RegisterAgent: %v", err)
	}
	return created
}

func TestRegisterAgentCreatesThenUpdates(t *testing.T) {
	st := openTestStore(t)
	if !registerTestAgent(t, st, &Agent{Pubkey: agentPK1, Name: "one", FirstRegisteredAt: 10}) {
		t.Error("first registration not reported as created")
	}
	var seen *Agent
	created, err := st.RegisterAgent(&Agent{Pubkey: agentPK1, Name: "two"}, func(old *Agent) error { seen = old; return nil })
	if err != nil || created {
		t.Fatalf("update: created %v, %v", created, err)
	}
	if seen == nil || seen.Name != "one" {
		t.Errorf("check saw %+v", seen)
	}
	a, err := st.Agent(agentPK1)
	if err != nil || a.Name != "two" {
		t.Errorf("Agent = %+v, %v", a, err)
	}
}

func TestRegisterAgentCheckRefusalStoresNothing(t *testing.T) {
	st := openTestStore(t)
	refused := errors.New("no")
	if _, err := st.RegisterAgent(&Agent{Pubkey: agentPK1, NIP05Local: "x"}, func(*Agent) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("err = %v", err)
	}
	if _, err := st.Agent(agentPK1); !errors.Is(err, ErrNotFound) {
		t.Errorf("stored after refusal: %v", err)
	}
	if _, err := st.LocalNIP05("x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("name claimed after refusal: %v", err)
	}
}

func TestLocalNIP05NamesAreFirstComeAndReleased(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, NIP05Local: "bot"})
	if _, err := st.RegisterAgent(&Agent{Pubkey: agentPK2, NIP05Local: "bot"}, func(*Agent) error { return nil }); !errors.Is(err, ErrNameTaken) {
		t.Errorf("second claim: %v", err)
	}
	if pk, err := st.LocalNIP05("bot"); err != nil || pk != agentPK1 {
		t.Errorf("LocalNIP05 = %q, %v", pk, err)
	}
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1}) // gives the name up
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, NIP05Local: "bot"})
	if pk, _ := st.LocalNIP05("bot"); pk != agentPK2 {
		t.Errorf("released name went to %q", pk)
	}
}

func TestBanAgentHidesAndBlocks(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, NIP05Local: "bot"})
	if err := st.BanAgent(agentPK1, "spam", time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if banned, _ := st.AgentBanned(agentPK1); !banned {
		t.Error("not banned")
	}
	if _, err := st.RegisterAgent(&Agent{Pubkey: agentPK1}, func(*Agent) error { return nil }); !errors.Is(err, ErrAgentBanned) {
		t.Errorf("banned registration: %v", err)
	}
	if _, err := st.LocalNIP05("bot"); !errors.Is(err, ErrNotFound) {
		t.Errorf("banned agent's name served: %v", err)
	}
	if pks, _ := st.AgentPubkeys(); len(pks) != 0 {
		t.Errorf("AgentPubkeys = %v", pks)
	}
	res, err := st.RecordAgentPosts([]AgentPost{{ID: "p", Pubkey: agentPK1}}, func(*Agent, *AgentActivity, AgentPost) error { return nil })
	if err != nil || !errors.Is(res[0], ErrAgentBanned) {
		t.Errorf("banned post: %v, %v", res, err)
	}
	st.BanAgent(agentPK1, "again", time.Unix(200, 0))
	if bans, _ := st.AgentBans(); bans[agentPK1].Reason != "spam" || bans[agentPK1].At != 100 {
		t.Errorf("bans = %+v", bans)
	}
	if err := st.UnbanAgent(agentPK1); err != nil {
		t.Fatal(err)
	}
	if err := st.UnbanAgent(agentPK1); !errors.Is(err, ErrNotFound) {
		t.Errorf("second unban: %v", err)
	}
}

func TestRecordAgentPostsCountsEachIDOnce(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1})
	count := func(_ *Agent, act *AgentActivity, _ AgentPost) error { act.Posts++; return nil }
	posts := []AgentPost{{ID: "a", Pubkey: agentPK1}, {ID: "a", Pubkey: agentPK1}, {ID: "b", Pubkey: agentPK2}}
	res, err := st.RecordAgentPosts(posts, count)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != nil || !errors.Is(res[1], ErrDuplicate) || !errors.Is(res[2], ErrNotFound) {
		t.Errorf("results = %v", res)
	}
	res, _ = st.RecordAgentPosts(posts[:1], count)
	if !errors.Is(res[0], ErrDuplicate) {
		t.Errorf("second batch: %v", res)
	}
	if act, _ := st.AgentActivityOf(agentPK1); act.Posts != 1 {
		t.Errorf("posts = %d", act.Posts)
	}
	// A refused post is not remembered as seen.
	refuse := func(*Agent, *AgentActivity, AgentPost) error { return Invalid("invalid: no") }
	if res, _ := st.RecordAgentPosts([]AgentPost{{ID: "c", Pubkey: agentPK1}}, refuse); !IsInvalid(res[0]) {
		t.Errorf("refusal: %v", res)
	}
	if res, _ := st.RecordAgentPosts([]AgentPost{{ID: "c", Pubkey: agentPK1}}, count); res[0] != nil {
		t.Errorf("after refusal: %v", res)
	}
}

func TestAgentRelayCursorNeverMovesBack(t *testing.T) {
	st := openTestStore(t)
	const u = "wss://relay.example"
	if c, err := st.AgentRelayCursor(u); err != nil || c != 0 {
		t.Errorf("unset cursor = %d, %v", c, err)
	}
	st.SetAgentRelayCursor(u, 50)
	st.SetAgentRelayCursor(u, 40)
	if c, _ := st.AgentRelayCursor(u); c != 50 {
		t.Errorf("cursor = %d, want 50", c)
	}
	st.SetAgentRelayCursor(u, 60)
	if c, _ := st.AgentRelayCursor(u); c != 60 {
		t.Errorf("cursor = %d, want 60", c)
	}
}

func TestEachAgentWalksAgentsWithActivityAndBans(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, Name: "b"})
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, Name: "a"})
	st.RecordAgentPosts([]AgentPost{{ID: "x", Pubkey: agentPK1}}, func(_ *Agent, act *AgentActivity, _ AgentPost) error {
		act.Days = append(act.Days, 1)
		return nil
	})
	st.BanAgent(agentPK2, "", time.Unix(1, 0))
	var got []string
	err := st.EachAgent(func(a *Agent, act *AgentActivity, banned bool) error {
		got = append(got, a.Name+":"+strings.Repeat("d", len(act.Days))+":"+map[bool]string{true: "banned", false: "ok"}[banned])
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a:d:ok,b::banned" {
		t.Errorf("EachAgent = %v, %v", got, err)
	}
}
