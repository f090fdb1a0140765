package directory

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

//go:embed templates/*.html
var templateFS embed.FS

var profileTemplate = template.Must(template.ParseFS(templateFS, "templates/profile.html"))

// levelNames are the spec's names of the admission levels.
var levelNames = [...]string{"new / sandbox", "admitted", "verified", "reputable"}

type profileView struct {
	Found           bool
	Entry           Entry
	LevelName       string
	Why             []string
	PowMinBits      int
	NIP05Claimed    string
	FirstRegistered string
	LastPost        string
	Posts           int64
	DocumentPath    string
	BrowsePath      string
}

// serveProfile serves the HTML profile of the agent at /agents/<npub> (a
// hex key works too). Unknown and banned agents get a 404 page.
func (d *Directory) serveProfile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	view := profileView{DocumentPath: d.opts.Path, BrowsePath: d.BrowsePath(), PowMinBits: d.opts.PowMinBits}
	status := http.StatusOK
	pk, err := ParsePubkey(strings.TrimPrefix(r.URL.Path, ProfilePrefix))
	if err == nil {
		err = d.fillProfile(r.Context(), &view, pk)
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrInvalidPubkey), errors.Is(err, storage.ErrNotFound):
		status = http.StatusNotFound
	default:
		d.logStoreFailure("agent profile", err)
		writeStoreFailure(w, err, "error: could not load the agent; try again")
		return
	}
	cache, title := "no-store", "Agent not found"
	if status == http.StatusOK {
		cache, title = "public, max-age="+strconv.Itoa(int(d.opts.MaxAge/time.Second)), view.Entry.Name+" (agent)"
	}
	// The site's shared layout and style (one look); no member
	// menu, so the page is the same for everyone and may be cached.
	d.opts.Pages.RenderPublic(w, r, status, cache, title, profileTemplate, view)
}

// fillProfile loads pk into view; banned and unknown agents are
// storage.ErrNotFound.
func (d *Directory) fillProfile(ctx context.Context, view *profileView, pk string) error {
	if banned, err := d.agents.Banned(ctx, pk); err != nil {
		return err
	} else if banned {
		return storage.ErrNotFound
	}
	a, err := d.agents.Get(ctx, pk)
	if err != nil {
		return err
	}
	act, err := d.agents.Activity(ctx, pk)
	if err != nil {
		return err
	}
	now := d.now()
	e := d.entry(a, act, now)
	_, why := d.level(e, e.Gates.NIP05 != nil, now)
	view.Found = true
	view.Entry = e
	view.LevelName = levelNames[e.Level]
	view.Why = why
	if e.Gates.NIP05 == nil {
		view.NIP05Claimed = a.NIP05
	}
	view.FirstRegistered = time.Unix(a.FirstRegisteredAt, 0).UTC().Format(time.RFC3339)
	if act.LastPostAt > 0 {
		view.LastPost = time.Unix(act.LastPostAt, 0).UTC().Format(time.RFC3339)
	}
	view.Posts = act.Posts
	return nil
}
