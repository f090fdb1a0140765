//go:build linux

package account_test

import (
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// On a full disk a signed-in member's pages still open, and the session's
// last-seen time, which cannot be recorded, is not logged at every page
// view: the store logs the full disk once a minute, and a line per page
// would fill what is left of it. A sign-in, which must write its session,
// is refused with the page that says the disk is full.
func TestSessionsOnAFullDiskReadWithoutALogLineAPage(t *testing.T) {
	const reserve = 16 << 20
	disk := storagetest.NewSmallDisk(t, 64<<20)
	st := disk.Store(reserve, nil)
	core, logs := observer.New(zap.InfoLevel)
	f := newFixtureOn(t, st, account.Options{Logger: zap.New(core), SessionTouchInterval: time.Nanosecond})
	f.member("alice")
	c := f.browser()
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
	disk.Fill(reserve / 2)

	for range 5 {
		wantStatus(t, f.get(c, "/settings"), http.StatusOK)
	}
	if n := logs.FilterMessageSnippet("last seen").Len(); n != 0 {
		t.Fatalf("%d log lines for 5 page views on a full disk: %v", n, logs.All())
	}
	r := f.signIn(f.browser(), "alice", password, "")
	wantStatus(t, r, http.StatusInsufficientStorage)
	wantBody(t, r, "disk is full")
}
