package oauth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The v1 instance document, which anyone may ask for without a limit, on a
// site of 10,000 members (bench/README.md, "The instance document"):
//
//	go test -tags nobadger,nomysql,nopgx -run '^$' -bench InstanceDocument -count 10 ./handlers/oauth/
func BenchmarkInstanceDocument10000Members(b *testing.B) {
	f := newFixture(b)
	seedMembers(b, f.store, 10000)
	r := f.request(http.MethodGet, oauth.InstanceV1Path, "", nil)
	if st, _ := r.json(b)["stats"].(map[string]any); st["user_count"] != 10000.0 {
		b.Fatalf("stats %v", st)
	}
	b.ResetTimer()
	for b.Loop() {
		if r := f.request(http.MethodGet, oauth.InstanceV1Path, "", nil); r.StatusCode != http.StatusOK {
			b.Fatalf("HTTP %d", r.StatusCode)
		}
	}
}

// seedMembers writes n member records as storage/members lays them out,
// with one password hash for all: CreateMember hashes each password
// (argon2id), which would take minutes for thousands. The members'
// counter is left for the first count to catch up, as in a store written
// before it existed.
func seedMembers(b *testing.B, st *storage.Store, n int) {
	hash := members.HashPassword("correct horse")
	for start := 0; start < n; start += 500 {
		err := st.Update(b.Context(), func(tx *storage.Tx) error {
			for i := start; i < min(start+500, n); i++ {
				id, name := fmt.Sprintf("%d", 1000000+i), fmt.Sprintf("member%d", i)
				v, _ := json.Marshal(members.Member{ID: id, Username: name, DisplayName: "Member " + name, PasswordHash: hash, SecurityStamp: "stamp"})
				if err := tx.Put(storage.Key("member", "name", name), []byte(id), 0); err != nil {
					return err
				}
				if err := tx.Put(storage.Key("member", "id", id), v, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
