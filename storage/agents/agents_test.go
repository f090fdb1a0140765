package agents

import (
	"errors"
	"fmt"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
	"strings"
	"testing"
	"time"
)

var (
	agentPK1 = strings.Repeat("1", 64)
	agentPK2 = strings.Repeat("2", 64)
)

func registerTestAgent(t *testing.T, st Store, a *Agent) bool {
	t.Helper()
	created, err := st.Register(t.Context(), a, func(*Agent) error { return nil })
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
	created, err := st.Register(t.Context(), &Agent{Pubkey: agentPK1, Name: "two"}, func(old *Agent) error { seen = old; return nil })
	if err != nil || created {
		t.Fatalf("update: created %v, %v", created, err)
	}
	if seen == nil || seen.Name != "one" {
		t.Errorf("check saw %+v", seen)
	}
	a, err := st.Get(t.Context(), agentPK1)
	if err != nil || a.Name != "two" {
		t.Errorf("Agent = %+v, %v", a, err)
	}
}

func TestRegisterAgentCheckRefusalStoresNothing(t *testing.T) {
	st := openTestStore(t)
	refused := errors.New("no")
	if _, err := st.Register(t.Context(), &Agent{Pubkey: agentPK1, NIP05: "x@agents.test", NIP05Local: "x"}, func(*Agent) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("err = %v", err)
	}
	if _, err := st.Get(t.Context(), agentPK1); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("stored after refusal: %v", err)
	}
	if _, err := claimantOf(t, st, "x@agents.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("name claimed after refusal: %v", err)
	}
}

func TestLocalNIP05NamesAreFirstComeAndReleased(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, NIP05: "bot@agents.test", NIP05Local: "bot"})
	if _, err := st.Register(t.Context(), &Agent{Pubkey: agentPK2, NIP05: "bot@agents.test", NIP05Local: "bot"}, func(*Agent) error { return nil }); !errors.Is(err, ErrNameTaken) {
		t.Errorf("second claim: %v", err)
	}
	if pk, err := claimantOf(t, st, "bot@agents.test"); err != nil || pk != agentPK1 {
		t.Errorf("NIP05Claim = %q, %v", pk, err)
	}
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1}) // gives the name up
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, NIP05: "bot@agents.test", NIP05Local: "bot"})
	if pk, _ := claimantOf(t, st, "bot@agents.test"); pk != agentPK2 {
		t.Errorf("released name went to %q", pk)
	}
}

func TestNIP05ClaimsAreByFullIdentifier(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, NIP05: "bob@old.test", NIP05Local: "bob"})
	// The same name under another domain is another claim.
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, NIP05: "bob@new.test", NIP05Local: "bob"})
	for id, want := range map[string]string{"bob@old.test": agentPK1, "bob@new.test": agentPK2} {
		if pk, err := claimantOf(t, st, id); err != nil || pk != want {
			t.Errorf("NIP05Claim(%s) = %q, %v; want %q", id, pk, err, want)
		}
	}
	if _, err := claimantOf(t, st, "bob@other.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("unclaimed domain: %v", err)
	}
	if _, err := st.Register(t.Context(), &Agent{Pubkey: agentPK2, NIP05: "bob@old.test", NIP05Local: "bob"}, func(*Agent) error { return nil }); !errors.Is(err, ErrNameTaken) {
		t.Errorf("claim of a taken identifier: %v", err)
	}
}

// Before claims were keyed by the full identifier, they were keyed by the
// name alone (agent/nip05/<name>). Such a record still answers for the
// identifier its owner registered, and for no other domain.
func TestNIP05ClaimOlderRecordKeyedByName(t *testing.T) {
	st := openTestStore(t)
	old := &Agent{Pubkey: agentPK1, NIP05: "bob@old.test", NIP05Local: "bob"}
	if err := st.st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.PutJSON(agentKey(agentPK1), old, 0); err != nil {
			return err
		}
		return tx.Put(storage.Key("agent", "nip05", "bob"), []byte(agentPK1), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if pk, err := claimantOf(t, st, "bob@old.test"); err != nil || pk != agentPK1 {
		t.Errorf("older claim not read: %q, %v", pk, err)
	}
	if pk, err := claimantOf(t, st, "bob@new.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("older claim answers for another domain: %q, %v", pk, err)
	}
	if _, err := st.Register(t.Context(), &Agent{Pubkey: agentPK2, NIP05: "bob@old.test", NIP05Local: "bob"}, func(*Agent) error { return nil }); !errors.Is(err, ErrNameTaken) {
		t.Errorf("older claim given away: %v", err)
	}
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, NIP05: "bob@new.test", NIP05Local: "bob"})
	// The owner registers again: its claim moves to the full identifier.
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, NIP05: "bob@old.test", NIP05Local: "bob"})
	if pk, err := claimantOf(t, st, "bob@old.test"); err != nil || pk != agentPK1 {
		t.Errorf("after re-registration: %q, %v", pk, err)
	}
	if pk, err := claimantOf(t, st, "bob@new.test"); err != nil || pk != agentPK2 {
		t.Errorf("other domain's claim after re-registration: %q, %v", pk, err)
	}
	// Giving the identifier up releases it, older record included.
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1})
	if _, err := claimantOf(t, st, "bob@old.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("released claim still answers: %v", err)
	}
	if err := st.st.View(t.Context(), func(tx *storage.Tx) error {
		if ok, err := tx.Has(storage.Key("agent", "nip05", "bob")); err != nil || ok {
			return fmt.Errorf("older record left behind: %v, %v", ok, err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

func TestBanAgentHidesAndBlocks(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, NIP05: "bot@agents.test", NIP05Local: "bot"})
	if err := st.Ban(t.Context(), agentPK1, "spam", time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if banned, _ := st.Banned(t.Context(), agentPK1); !banned {
		t.Error("not banned")
	}
	if _, err := st.Register(t.Context(), &Agent{Pubkey: agentPK1}, func(*Agent) error { return nil }); !errors.Is(err, ErrAgentBanned) {
		t.Errorf("banned registration: %v", err)
	}
	if _, err := claimantOf(t, st, "bot@agents.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("banned agent's name served: %v", err)
	}
	if pks, _ := st.Authors(t.Context()); len(pks) != 0 {
		t.Errorf("Authors = %v", pks)
	}
	res, err := st.RecordPosts(t.Context(), []Post{{ID: "p", Pubkey: agentPK1}}, func(*Agent, *Activity, Post) error { return nil })
	if err != nil || !errors.Is(res[0], ErrAgentBanned) {
		t.Errorf("banned post: %v, %v", res, err)
	}
	st.Ban(t.Context(), agentPK1, "again", time.Unix(200, 0))
	if bans, _ := st.Bans(t.Context()); bans[agentPK1].Reason != "spam" || bans[agentPK1].At != 100 {
		t.Errorf("bans = %+v", bans)
	}
	if err := st.Unban(t.Context(), agentPK1); err != nil {
		t.Fatal(err)
	}
	if err := st.Unban(t.Context(), agentPK1); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("second unban: %v", err)
	}
}

func TestRecordAgentPostsCountsEachIDOnce(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1})
	count := func(_ *Agent, act *Activity, _ Post) error { act.Posts++; return nil }
	posts := []Post{{ID: "a", Pubkey: agentPK1}, {ID: "a", Pubkey: agentPK1}, {ID: "b", Pubkey: agentPK2}}
	res, err := st.RecordPosts(t.Context(), posts, count)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != nil || !errors.Is(res[1], ErrDuplicate) || !errors.Is(res[2], storage.ErrNotFound) {
		t.Errorf("results = %v", res)
	}
	res, _ = st.RecordPosts(t.Context(), posts[:1], count)
	if !errors.Is(res[0], ErrDuplicate) {
		t.Errorf("second batch: %v", res)
	}
	if act, _ := st.Activity(t.Context(), agentPK1); act.Posts != 1 {
		t.Errorf("posts = %d", act.Posts)
	}
	// A refused post is not remembered as seen.
	refuse := func(*Agent, *Activity, Post) error { return storage.Invalid("invalid: no") }
	if res, _ := st.RecordPosts(t.Context(), []Post{{ID: "c", Pubkey: agentPK1}}, refuse); !storage.IsInvalid(res[0]) {
		t.Errorf("refusal: %v", res)
	}
	if res, _ := st.RecordPosts(t.Context(), []Post{{ID: "c", Pubkey: agentPK1}}, count); res[0] != nil {
		t.Errorf("after refusal: %v", res)
	}
}

// RecordPosts remembers what it decoded of each author's records; a record
// changed in between (by anyone) is read again, and the next batch starts
// from the activity written, not from a copy apply changed further.
func TestRecordPostsReadsChangedRecordsAgain(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, FirstRegisteredAt: 100})
	var first int64
	add := func(a *Agent, act *Activity, p Post) error {
		first = a.FirstRegisteredAt
		act.Posts++
		act.Days = append(act.Days, int32(p.CreatedAt))
		return nil
	}
	refuse := func(a *Agent, _ *Activity, _ Post) error {
		first = a.FirstRegisteredAt
		return storage.Invalid("invalid: no")
	}
	for i, step := range []struct {
		first int64
		apply func(*Agent, *Activity, Post) error
	}{{100, add}, {100, add}, {100, refuse}, {200, add}, {200, add}} {
		if step.first != first && i > 0 {
			registerTestAgent(t, st, &Agent{Pubkey: agentPK1, FirstRegisteredAt: step.first})
		}
		first = 0
		if _, err := st.RecordPosts(t.Context(), []Post{{ID: fmt.Sprint("p", i), Pubkey: agentPK1, CreatedAt: int64(i)}}, step.apply); err != nil {
			t.Fatal(err)
		}
		if first != step.first {
			t.Errorf("post %d: apply saw FirstRegisteredAt %d, want %d", i, first, step.first)
		}
	}
	act, err := st.Activity(t.Context(), agentPK1)
	if err != nil {
		t.Fatal(err)
	}
	if act.Posts != 4 || fmt.Sprint(act.Days) != "[0 1 3 4]" {
		t.Errorf("activity: %d posts, days %v; want 4, [0 1 3 4]", act.Posts, act.Days)
	}
}

func TestEachAgentWalksAgentsWithActivityAndBans(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, Name: "b"})
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, Name: "a"})
	st.RecordPosts(t.Context(), []Post{{ID: "x", Pubkey: agentPK1}}, func(_ *Agent, act *Activity, _ Post) error {
		act.Days = append(act.Days, 1)
		return nil
	})
	st.Ban(t.Context(), agentPK2, "", time.Unix(1, 0))
	var got []string
	err := st.Each(t.Context(), func(a *Agent, act *Activity, banned bool) error {
		got = append(got, a.Name+":"+strings.Repeat("d", len(act.Days))+":"+map[bool]string{true: "banned", false: "ok"}[banned])
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a:d:ok,b::banned" {
		t.Errorf("EachAgent = %v, %v", got, err)
	}
}

func TestStampDirectoryDocumentKeepsTheFirstTime(t *testing.T) {
	st := openTestStore(t)
	stamp := func(sum, prev string, at int64) int64 {
		t.Helper()
		got, err := st.StampDocument(t.Context(), sum, prev, at)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := stamp("aa", "", 100); got != 100 {
		t.Errorf("new content: %d, want 100", got)
	}
	if got := stamp("aa", "", 200); got != 100 {
		t.Errorf("same content again (a restart): %d, want 100", got)
	}
	if got := stamp("bb", "aa", 300); got != 300 {
		t.Errorf("changed content: %d, want 300", got)
	}
	// Content that comes back after a change is a change too.
	if got := stamp("aa", "bb", 400); got != 400 {
		t.Errorf("content back after a change: %d, want 400", got)
	}
}

// The engine suite's server for this package (storagetest.Main).
const testPostgresPort = 15441

func TestMain(m *testing.M) { storagetest.Main(m, testPostgresPort) }

// openTestStore opens the agent records of a store of their own.
func openTestStore(t testing.TB) Store { return Of(storagetest.Open(t)) }

// claimantOf is the pubkey holding the claim on id.
func claimantOf(t *testing.T, st Store, id string) (string, error) {
	t.Helper()
	c, err := st.NIP05Claim(t.Context(), id)
	return c.Pubkey, err
}
