package directory

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// A claim on name@<nip05_domain> holds the name but vouches for nothing until
// the operator approves it: gates.nip05 stays null, the level does not rise,
// and /.well-known/nostr.json does not list it.
func TestLocalNIP05ClaimIsPendingUntilApproved(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test"})
	a := newAgent(t)
	en := e.mustRegister(regEvent(t, a, e.now(), "bob", nostr.Tag{"nip05", "bob@agents.test"}))
	if en.Gates.NIP05 != nil || en.Level != 0 {
		t.Fatalf("unapproved claim: gates %+v level %d; want nip05 null, level 0", en.Gates, en.Level)
	}
	if en := e.mustEntry(a.pk); en.Gates.NIP05 != nil || en.Level != 0 {
		t.Fatalf("document before approval: gates %+v level %d", en.Gates, en.Level)
	}
	if names := e.wellKnownNames("bob"); len(names) != 0 {
		t.Fatalf("nostr.json vouches for an unapproved claim: %v", names)
	}
	// The name is held: nobody else takes it while it waits.
	if r := e.register(regEvent(t, newAgent(t), e.now(), "other", nostr.Tag{"nip05", "bob@agents.test"})); r.status != http.StatusBadRequest {
		t.Errorf("second claim on a pending name: %d %s", r.status, r.body)
	}
	names, err := e.dir.Names(t.Context())
	if err != nil || len(names) != 1 || names[0].ID != "bob@agents.test" || names[0].Pubkey != a.pk || names[0].Approved || names[0].Verified {
		t.Fatalf("Names = %+v, %v", names, err)
	}

	c, err := e.dir.ApproveName(t.Context(), "bob")
	if err != nil || c.Pubkey != a.pk {
		t.Fatalf("ApproveName = %+v, %v", c, err)
	}
	if en := e.mustEntry(a.pk); en.Gates.NIP05 == nil || *en.Gates.NIP05 != "bob@agents.test" || en.Level != 1 {
		t.Fatalf("after approval: gates %+v level %d", en.Gates, en.Level)
	}
	if names := e.wellKnownNames("bob"); names["bob"] != a.pk {
		t.Fatalf("nostr.json after approval: %v", names)
	}
	// A newer registration with the same identifier keeps the approval;
	// one that names another identifier gives the name and approval up.
	e.clock.Advance(time.Minute)
	if en := e.mustRegister(regEvent(t, a, e.now(), "bob v2", nostr.Tag{"nip05", "bob@agents.test"})); en.Gates.NIP05 == nil {
		t.Errorf("re-registration lost the approval: %+v", en.Gates)
	}
	e.clock.Advance(time.Minute)
	e.mustRegister(regEvent(t, a, e.now(), "bob v3", nostr.Tag{"nip05", "robert@agents.test"}))
	e.clock.Advance(time.Minute)
	if en := e.mustRegister(regEvent(t, a, e.now(), "bob v4", nostr.Tag{"nip05", "bob@agents.test"})); en.Gates.NIP05 != nil {
		t.Errorf("a name given up and claimed again is still approved: %+v", en.Gates)
	}
	if _, err := e.dir.ApproveName(t.Context(), "nobody"); !errors.Is(err, ErrNoClaim) {
		t.Errorf("approving a free name: %v", err)
	}
	if _, err := e.dir.ApproveName(t.Context(), "bob@elsewhere.test"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("approving a name of another domain: %v", err)
	}
}

// nip05_open_claims: the site chooses first come, first verified.
func TestLocalNIP05OpenClaimsAreVerifiedAtOnce(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true})
	a := newAgent(t)
	en := e.mustRegister(regEvent(t, a, e.now(), "bob", nostr.Tag{"nip05", "bob@agents.test"}))
	if en.Gates.NIP05 == nil || en.Level != 1 {
		t.Fatalf("open claim: gates %+v level %d", en.Gates, en.Level)
	}
	if names := e.wellKnownNames("bob"); names["bob"] != a.pk {
		t.Fatalf("nostr.json: %v", names)
	}
	// Reserved names stay reserved when claims are open.
	if r := e.register(regEvent(t, newAgent(t), e.now(), "x", nostr.Tag{"nip05", "admin@agents.test"})); r.status != http.StatusBadRequest {
		t.Errorf("admin@ with open claims: %d %s", r.status, r.body)
	}
}

// Reserved names, configured ones and members' usernames are refused to
// every key but a maintainer's, whose claims need no approval.
func TestReservedLocalNIP05NamesAreRefused(t *testing.T) {
	maint := newAgent(t)
	store := openStore(t)
	if _, err := members.Of(store).CreateMember(t.Context(), "Alice", "", "a long password"); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, store, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true, NIP05Reserved: []string{"Bakery"}, Maintainers: []string{maint.npub()}})
	for _, id := range []string{"admin@agents.test", "Root@agents.test", "agents.test", "_@agents.test", "postmaster@agents.test", "bakery@agents.test", "alice@agents.test"} {
		r := e.register(regEvent(t, newAgent(t), e.now(), "squatter", nostr.Tag{"nip05", id}))
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), "reserved") {
			t.Errorf("claim on %s: %d %s", id, r.status, r.body)
		}
	}
	if doc := e.document(); len(doc.Agents) != 0 {
		t.Errorf("refused claims stored agents: %+v", doc.Agents)
	}
	// The maintainer may be _@ the site, verified without approval even
	// where claims are not open.
	closed := newEnvOn(t, store, Options{NIP05Domain: "agents.test", Maintainers: []string{maint.npub()}})
	en := closed.mustRegister(regEvent(t, maint, closed.now(), "site", nostr.Tag{"nip05", "agents.test"}))
	if en.Gates.NIP05 == nil || *en.Gates.NIP05 != "_@agents.test" {
		t.Errorf("maintainer's claim on _: %+v", en.Gates)
	}
	if names := closed.wellKnownNames("_"); names["_"] != maint.pk {
		t.Errorf("nostr.json for _: %v", names)
	}
}

// A reserved name or a member's username with other separators, another
// case or separators at either end is the same name: refused, where
// claims are open too, but not to a maintainer; a name that only
// contains one stays free.
func TestReservedLocalNIP05NamesAreRefusedWithOtherSeparators(t *testing.T) {
	maint := newAgent(t)
	store := openStore(t)
	for _, name := range []string{"john_doe", "_eve"} {
		if _, err := members.Of(store).CreateMember(t.Context(), name, "", "a long password"); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnvOn(t, store, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true, NIP05Reserved: []string{"bake-ry"}, Maintainers: []string{maint.npub()}})
	for _, local := range []string{"admin.", "admin-", "Admin_", ".admin", "-", "..", "john.doe", "John-Doe", "_john_doe_", "eve", "eve.", "bake.ry", "bake_ry"} {
		r := e.register(regEvent(t, newAgent(t), e.now(), "squatter", nostr.Tag{"nip05", local + "@agents.test"}))
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), "reserved") {
			t.Errorf("claim on %s@agents.test: %d %s", local, r.status, r.body)
		}
	}
	if names := e.wellKnownNames("admin."); len(names) != 0 {
		t.Errorf("nostr.json vouches for admin.: %v", names)
	}
	for _, local := range []string{"admins", "johndoe", "john.doe.jr", "bakery"} {
		if en := e.mustRegister(regEvent(t, newAgent(t), e.now(), "free", nostr.Tag{"nip05", local + "@agents.test"})); en.Gates.NIP05 == nil {
			t.Errorf("open claim on %s@agents.test not verified: %+v", local, en.Gates)
		}
	}
	if en := e.mustRegister(regEvent(t, maint, e.now(), "site", nostr.Tag{"nip05", "admin.@agents.test"})); en.Gates.NIP05 == nil {
		t.Errorf("maintainer's claim on admin.: %+v", en.Gates)
	}
}

// A ban releases the banned agent's name: the squatter keeps nobody from it.
func TestBanReleasesTheLocalNIP05Name(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test"})
	squatter, owner := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, squatter, e.now(), "squatter", nostr.Tag{"nip05", "bob@agents.test"}))
	if _, err := e.dir.ApproveName(t.Context(), "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dir.Ban(t.Context(), squatter.pk, "squatting"); err != nil {
		t.Fatal(err)
	}
	if names := e.wellKnownNames("bob"); len(names) != 0 {
		t.Errorf("banned agent's name served: %v", names)
	}
	e.mustRegister(regEvent(t, owner, e.now(), "owner", nostr.Tag{"nip05", "bob@agents.test"}))
	if _, err := e.dir.ApproveName(t.Context(), "bob"); err != nil {
		t.Fatal(err)
	}
	if names := e.wellKnownNames("bob"); names["bob"] != owner.pk {
		t.Errorf("nostr.json after the new claim: %v", names)
	}
	// Lifting the ban does not hand the name back.
	if _, err := e.dir.Unban(t.Context(), squatter.pk); err != nil {
		t.Fatal(err)
	}
	if en := e.mustEntry(squatter.pk); en.Gates.NIP05 != nil {
		t.Errorf("unbanned squatter: %+v", en.Gates)
	}
	if names := e.wellKnownNames("bob"); names["bob"] != owner.pk {
		t.Errorf("nostr.json after the unban: %v", names)
	}
}

// The operator releases a name: its holder loses it, approved or not, and
// another agent may claim it.
func TestReleaseNameFreesIt(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test"})
	first, second := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, first, e.now(), "first", nostr.Tag{"nip05", "bob@agents.test"}))
	e.dir.ApproveName(t.Context(), "bob@agents.test")
	c, err := e.dir.ReleaseName(t.Context(), "BOB@agents.test")
	if err != nil || c.Pubkey != first.pk {
		t.Fatalf("ReleaseName = %+v, %v", c, err)
	}
	if en := e.mustEntry(first.pk); en.Gates.NIP05 != nil || en.Level != 0 {
		t.Errorf("after release: gates %+v level %d", en.Gates, en.Level)
	}
	if names := e.wellKnownNames("bob"); len(names) != 0 {
		t.Errorf("released name served: %v", names)
	}
	e.mustRegister(regEvent(t, second, e.now(), "second", nostr.Tag{"nip05", "bob@agents.test"}))
	if names, _ := e.dir.Names(t.Context()); len(names) != 1 || names[0].Pubkey != second.pk {
		t.Errorf("Names after the new claim: %+v", names)
	}
	if _, err := e.dir.ReleaseName(t.Context(), "nobody"); !errors.Is(err, ErrNoClaim) {
		t.Errorf("releasing a free name: %v", err)
	}
}

// dialRecorder is a NIP-05 fetcher that records the host:port each fetch
// asks for and dials the test domain instead.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (r *dialRecorder) fetcher(dom *nip05Domain) *safefetch.Fetcher {
	f := dom.fetcher()
	opts := f.Options()
	opts.DialAddress = func(addr string) string {
		r.mu.Lock()
		r.addrs = append(r.addrs, addr)
		r.mu.Unlock()
		return dom.srv.Listener.Addr().String()
	}
	return safefetch.New(opts)
}

// An unauthenticated registration cannot make the server connect to a
// host:port of its choosing: an identifier naming a port is refused before
// any fetch, and checks go to port 443 (or nip05_port) of the domain.
func TestNIP05ChecksFetchOnlyTheConfiguredPort(t *testing.T) {
	dom := newNIP05Domain(t)
	var rec dialRecorder
	e := newEnv(t, Options{Fetcher: rec.fetcher(dom)})
	for _, id := range []string{"bot@example.com:6379", "bot@example.com:443", "example.com:25"} {
		r := e.register(regEvent(t, newAgent(t), e.now(), "prober", nostr.Tag{"nip05", id}))
		if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "invalid:") {
			t.Errorf("identifier %s: %d %s", id, r.status, r.body)
		}
	}
	if n := dom.requests.Load(); n != 0 || len(rec.addrs) != 0 {
		t.Fatalf("identifiers with a port were fetched: %d requests, dialled %v", n, rec.addrs)
	}
	a := newAgent(t)
	dom.set("bot", a.pk)
	if en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@example.com"})); en.Gates.NIP05 == nil {
		t.Errorf("bot@example.com not verified: %+v", en.Gates)
	}
	var rec2 dialRecorder
	e2 := newEnv(t, Options{Fetcher: rec2.fetcher(dom), NIP05Port: 8443})
	b := newAgent(t)
	dom.set("other", b.pk)
	e2.mustRegister(regEvent(t, b, e2.now(), "other", nostr.Tag{"nip05", "other@example.com"}))
	if len(rec.addrs) != 1 || rec.addrs[0] != "example.com:443" || len(rec2.addrs) != 1 || rec2.addrs[0] != "example.com:8443" {
		t.Errorf("dialled %v with the default port, %v with nip05_port 8443", rec.addrs, rec2.addrs)
	}
}
