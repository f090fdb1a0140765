package directory

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBanRemovesTheAgentFromTheDocumentAtOnce(t *testing.T) {
	e := newEnv(t, Options{})
	a, b := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "bad"))
	e.mustRegister(regEvent(t, b, e.now(), "good"))
	e.dir.Rebuild(t.Context())
	pk, err := e.dir.Ban(t.Context(), a.npub(), "spam")
	if err != nil || pk != a.pk {
		t.Fatalf("Ban = %q, %v", pk, err)
	}
	// No Rebuild call: Ban publishes the document itself.
	doc := e.fetchDocument()
	if len(doc.Agents) != 1 || doc.Agents[0].Pubkey != b.pk {
		t.Errorf("document after ban: %+v", doc.Agents)
	}
}

func TestBannedAgentRegistrationIsBlocked(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	// Banned before it ever registered.
	if _, err := e.dir.Ban(t.Context(), a.pk, ""); err != nil {
		t.Fatal(err)
	}
	r := e.register(regEvent(t, a, e.now(), "again"))
	if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "blocked:") {
		t.Errorf("banned registration: %d %s", r.status, r.body)
	}
}

func TestBannedAgentPostsAreBlocked(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "muted")
	e.dir.Ban(t.Context(), a.pk, "")
	res := e.post(note(t, a, e.now(), "let me in"))
	if res[0].OK || !hasPrefix(res[0].Message, "blocked:") {
		t.Errorf("banned post: %+v", res[0])
	}
}

func TestUnbanRestoresTheAgent(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	reg := regEvent(t, a, e.now(), "forgiven")
	e.mustRegister(reg)
	e.dir.Ban(t.Context(), a.pk, "")
	pk, err := e.dir.Unban(t.Context(), a.npub())
	if err != nil || pk != a.pk {
		t.Fatalf("Unban = %q, %v", pk, err)
	}
	doc := e.fetchDocument()
	if len(doc.Agents) != 1 || doc.Agents[0].RegistrationEvent != reg.ID {
		t.Errorf("document after unban: %+v", doc.Agents)
	}
	e.mustPost(note(t, a, e.now(), "back"))
}

func TestUnbanOfAnAgentNotBanned(t *testing.T) {
	e := newEnv(t, Options{})
	if _, err := e.dir.Unban(t.Context(), newAgent(t).pk); !errors.Is(err, ErrNotBanned) {
		t.Errorf("err = %v, want ErrNotBanned", err)
	}
}

func TestBanAndUnbanRefuseInvalidKeys(t *testing.T) {
	e := newEnv(t, Options{})
	for _, s := range []string{"", "npub1xyz", "zz", strings.Repeat("g", 64)} {
		if _, err := e.dir.Ban(t.Context(), s, ""); !errors.Is(err, ErrInvalidPubkey) {
			t.Errorf("Ban(%q) = %v", s, err)
		}
		if _, err := e.dir.Unban(t.Context(), s); !errors.Is(err, ErrInvalidPubkey) {
			t.Errorf("Unban(%q) = %v", s, err)
		}
	}
	if _, err := e.dir.Ban(t.Context(), newAgent(t).pk, strings.Repeat("r", MaxBanReasonLen+1)); err == nil {
		t.Error("overlong reason accepted")
	}
}

func TestBanTwiceKeepsTheFirstBan(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	e.dir.Ban(t.Context(), a.pk, "first")
	e.clock.Advance(time.Hour)
	e.dir.Ban(t.Context(), a.pk, "second")
	list, _ := e.dir.Agents(t.Context())
	if len(list) != 1 || list[0].BanReason != "first" || *list[0].BannedAt != t0.Unix() {
		t.Errorf("list = %+v", list)
	}
}

func TestAgentsListsRegisteredBannedAndBannedOnlyKeys(t *testing.T) {
	e := newEnv(t, Options{})
	active, banned, neverRegistered := newAgent(t), newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, active, e.now(), "active", nostrTag("nip05", "active@nowhere.example")))
	e.mustRegister(regEvent(t, banned, e.now(), "banned"))
	e.clock.Advance(time.Minute)
	e.mustPost(note(t, active, e.now(), "hi"))
	e.dir.Ban(t.Context(), banned.pk, "abuse")
	e.dir.Ban(t.Context(), neverRegistered.npub(), "preemptive")

	list, err := e.dir.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("%d agents listed", len(list))
	}
	byPK := map[string]AgentStatus{}
	for _, s := range list {
		byPK[s.Pubkey] = s
	}
	if s := byPK[active.pk]; !s.Registered || s.Banned || s.Posts != 1 || s.LastPostAt == nil || s.NIP05Claimed != "active@nowhere.example" || s.Name != "active" {
		t.Errorf("active = %+v", s)
	}
	if s := byPK[banned.pk]; !s.Registered || !s.Banned || s.BanReason != "abuse" || s.Name != "banned" {
		t.Errorf("banned = %+v", s)
	}
	if s := byPK[neverRegistered.pk]; s.Registered || !s.Banned || s.Npub != neverRegistered.npub() || list[2].Pubkey != neverRegistered.pk {
		t.Errorf("ban without registration = %+v (listed last)", s)
	}
}
