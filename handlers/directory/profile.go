package directory

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
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

// profileCSS is the page's only style; the Content-Security-Policy allows
// exactly this text by its hash, and nothing else (no scripts, no images, no
// external resources).
const profileCSS = `body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}` +
	`main{max-width:44rem;margin:0 auto;padding:1.5rem}` +
	`h1{margin-bottom:.2rem}h2{margin-top:1.8rem;font-size:1.15rem}` +
	`code{font-size:.85em;word-break:break-all}` +
	`dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}dt{font-weight:600}dd{margin:0}` +
	`ul.caps{margin:0;padding-left:1.1rem}` +
	`.badge{font-size:.7em;padding:.1em .5em;border-radius:.5em;background:#e3ecff;vertical-align:middle}` +
	`.flags strong{color:#a4262c}.foot{margin-top:2rem;color:#666;font-size:.9em}` +
	`@media(prefers-color-scheme:dark){body{background:#161618;color:#e8e8ea}.badge{background:#2b3a5c}a{color:#8ab4ff}}`

var profileCSP = func() string {
	sum := sha256.Sum256([]byte(profileCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

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
	CSS             template.CSS
}

// serveProfile serves the HTML profile of the agent at /agents/<npub> (a
// hex key works too). Unknown and banned agents get a 404 page.
func (d *Directory) serveProfile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	view := profileView{DocumentPath: d.opts.Path, PowMinBits: d.opts.PowMinBits, CSS: template.CSS(profileCSS)}
	status := http.StatusOK
	pk, err := ParsePubkey(strings.TrimPrefix(r.URL.Path, ProfilePrefix))
	if err == nil {
		err = d.fillProfile(&view, pk)
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrInvalidPubkey), errors.Is(err, storage.ErrNotFound):
		status = http.StatusNotFound
	default:
		d.opts.Logger.Error("agent profile: " + err.Error())
		writeStoreFailure(w, err, "error: could not load the agent; try again")
		return
	}
	var buf bytes.Buffer
	if err := profileTemplate.Execute(&buf, view); err != nil {
		d.opts.Logger.Error("render agent profile: " + err.Error())
		writeError(w, http.StatusInternalServerError, "error: could not render the page")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Content-Security-Policy", profileCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if status == http.StatusOK {
		h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(d.opts.MaxAge/time.Second)))
	} else {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		w.Write(buf.Bytes())
	}
}

// fillProfile loads pk into view; banned and unknown agents are
// storage.ErrNotFound.
func (d *Directory) fillProfile(view *profileView, pk string) error {
	if banned, err := d.store.AgentBanned(pk); err != nil {
		return err
	} else if banned {
		return storage.ErrNotFound
	}
	a, err := d.store.Agent(pk)
	if err != nil {
		return err
	}
	act, err := d.store.AgentActivityOf(pk)
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
