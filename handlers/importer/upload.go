package importer

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Imports: POST UploadPath takes a file as Inboxt's web app sends it
// (multipart fields file, type, labelIds: apps/web/src/modals/ImportModal/
// ImportModal.tsx, and the controller apps/api/src/modules/import/
// import.controller.ts, Inboxt/inboxt@45f4314), for a member signed in
// with the session cookie (same-origin only) or with a token. The file is
// staged and checked before anything is written; the import then runs in
// the background (Runner) and the Import settings page,
// the importJobs query and `caddy hearth import` show its progress.

//go:embed templates/import.html
var templates embed.FS

// Route is what POST UploadPath takes (access.Route): an import writes
// items and has them fetched.
var Route = access.Route{Name: "POST " + UploadPath, AnyScope: []string{access.Write}, APITokens: true, Sessions: true}

// Uploads serves POST UploadPath and the Import settings page for one
// site, starting imports on its Runner. Build it with NewUploads.
type Uploads struct {
	store  *storage.Store
	runner *Runner
	gate   *inboxtapi.Gate
	pages  *account.Pages
	log    *zap.Logger
	// uploading holds the members whose upload is being received.
	uploading sync.Map
}

// NewUploads returns the import routes of a site: callers are who gate
// says (a token with write, or the member's session when pages is set),
// within its rate limits; the page renders with pages.
func NewUploads(store *storage.Store, runner *Runner, gate *inboxtapi.Gate, pages *account.Pages, log *zap.Logger) *Uploads {
	if log == nil {
		log = zap.NewNop()
	}
	return &Uploads{store: store, runner: runner, gate: gate, pages: pages, log: log}
}

// Paths of imports.
const (
	UploadPath = "/api/import"
	PagePath   = "/settings/import"
	PageTitle  = "Import"
)

// importUpload is what a POST to UploadPath carries.
type importUpload struct {
	staged, fileName string
	format           Format
	labelIDs         []string
	fromPage         bool
}

// Handles reports whether r is for UploadPath.
func (u *Uploads) Handles(r *http.Request) bool { return r.URL.Path == UploadPath }

// ServeHTTP takes an import posted to UploadPath.
func (u *Uploads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		inboxtapi.WriteREST(w, http.StatusMethodNotAllowed, "use POST with a multipart/form-data body (file, type, labelIds)", r.URL.Path)
		return
	}
	if u.pages != nil && browserForm(r) && u.pages.CheckCrossOrigin(r) != nil {
		// A form another site made a signed-in browser send: refused as
		// the other pages' forms are (account.Pages.Protect), with the
		// site's page rather than the API's JSON, before its body is read.
		u.pages.RefuseCrossOrigin(w, r)
		return
	}
	c := u.gate.RESTCaller(w, r, Route, "take an import", r.URL.Path)
	if c == nil {
		return
	}
	// One upload at a time per member, and none while the member has as
	// many imports unfinished as the store takes: a file is staged on
	// disk before it is checked, so a member cannot fill the disk with
	// uploads that would be refused.
	// A form of the Import page (a signed-in browser asking for HTML)
	// gets the page again with the error, before its body is read too.
	pageForm := c.Session && strings.Contains(r.Header.Get("Accept"), "text/html")
	refuse := func(status int, msg string) {
		if pageForm {
			u.renderPage(w, r, c.Member, status, msg)
			return
		}
		inboxtapi.WriteREST(w, status, msg, r.URL.Path)
	}
	if _, busy := u.uploading.LoadOrStore(c.Member.ID, struct{}{}); busy {
		refuse(http.StatusConflict, "another upload of yours is being received; wait for it to finish")
		return
	}
	defer u.uploading.Delete(c.Member.ID)
	if jobs, err := library.Of(u.store).ImportJobs(r.Context(), c.Member.ID); err == nil {
		unfinished := 0
		for _, j := range jobs {
			if !j.Finished() {
				unfinished++
			}
		}
		if unfinished >= library.MaxUnfinishedImports {
			refuse(http.StatusConflict, fmt.Sprintf("%d imports are still running; wait for one to finish", unfinished))
			return
		}
	}
	up, status, msg := u.readUpload(w, r, c.Member)
	if up != nil && up.fromPage {
		pageForm = true
	}
	if msg != "" {
		refuse(status, msg)
		return
	}
	job, err := u.runner.Start(r.Context(), c.Member.ID, up.staged, up.fileName, up.format, up.labelIDs)
	if err != nil {
		status, msg := http.StatusBadRequest, err.Error()
		if !IsFileError(err) && !storage.IsInvalid(err) {
			if st, _, ok := inboxtapi.Refusal(w, err); ok {
				status, msg = st, "the store cannot take an import now; try again later"
			} else {
				u.log.Error("start import", zap.Error(err))
				status, msg = http.StatusInternalServerError, "the import could not be started; try again"
			}
		}
		refuse(status, msg)
		return
	}
	u.log.Info("import started", zap.String("member", c.Member.Username), zap.String("job", job.ID),
		zap.String("format", job.Format), zap.Int("entries", job.Total))
	if up.fromPage {
		// No fragment (#job-…): the page reloads itself with a Refresh
		// header, and a refresh to a URL with a fragment is an in-page jump
		// that never reloads.
		http.Redirect(w, r, PagePath, http.StatusSeeOther)
		return
	}
	// Inboxt answers VOID_RESPONSE ({success: true}) with Nest's 201;
	// the job's id and entry count are Hearth's additions.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"success": true, "jobId": job.ID, "format": job.Format, "total": job.Total})
}

// browserForm reports whether r is a form a browser sent as a page's
// (navigating to the answer: Accept names text/html, or a body only forms
// send, urlencoded or text/plain), without a token, which only scripts
// send. Scripts, Inboxt's web app among them, post multipart/form-data
// with Accept */* and get the API's JSON errors.
func browserForm(r *http.Request) bool {
	if _, present, _ := access.Bearer(r); present {
		return false // a token, however written: a client, not a page
	}
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		return true
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/x-www-form-urlencoded" || mt == "text/plain"
}

// maxUploadFields bounds the parts of an upload other than its file: its
// type, where it came from and its labels (library.MaxBatchIDs), with room
// for a few a client adds.
const maxUploadFields = library.MaxBatchIDs + 10

// readImportUpload streams the multipart body: the file to the staging
// directory (refused past the upload limit, before anything else is
// written), the type and the label ids. A message means refused.
func (u *Uploads) readUpload(w http.ResponseWriter, r *http.Request, m *members.Member) (*importUpload, int, string) {
	lim := u.runner.Limits()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		return nil, http.StatusUnsupportedMediaType, "send the file as multipart/form-data (fields file, type, labelIds)"
	}
	if r.ContentLength > lim.MaxUploadBytes+1<<20 {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is larger than %d bytes (the import limit)", lim.MaxUploadBytes)
	}
	r.Body = http.MaxBytesReader(w, r.Body, lim.MaxUploadBytes+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, http.StatusBadRequest, "the multipart body could not be read"
	}
	up := &importUpload{}
	fail := func(status int, msg string) (*importUpload, int, string) {
		if up.staged != "" {
			os.Remove(up.staged)
			up.staged = ""
		}
		return up, status, msg
	}
	typ := ""
	fields := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is larger than %d bytes (the import limit)", lim.MaxUploadBytes))
			}
			return fail(http.StatusBadRequest, "the multipart body could not be read")
		}
		// Each part costs the multipart reader its headers: the fields
		// beside the file are few, so a body of many is refused as soon
		// as it has more, not read to its end.
		if p.FormName() != "file" {
			if fields++; fields > maxUploadFields {
				return fail(http.StatusBadRequest, "too many form fields")
			}
		}
		switch p.FormName() {
		case "file":
			if up.staged != "" {
				return fail(http.StatusBadRequest, "send one file")
			}
			staged, err := u.runner.Stage(p)
			if err != nil {
				var tooBig *http.MaxBytesError
				if IsFileError(err) || errors.As(err, &tooBig) {
					return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is larger than %d bytes (the import limit)", lim.MaxUploadBytes))
				}
				u.log.Error("stage import", zap.Error(err))
				return fail(http.StatusInternalServerError, "the file could not be received; try again")
			}
			up.staged, up.fileName = staged, p.FileName()
		case "type", "labelIds", "labelIds[]", "from":
			b, err := io.ReadAll(io.LimitReader(p, 256))
			if err != nil {
				return fail(http.StatusBadRequest, "the multipart body could not be read")
			}
			v := strings.TrimSpace(string(b))
			switch p.FormName() {
			case "type":
				typ = v
			case "from":
				up.fromPage = v == "settings"
			default:
				if v != "" {
					up.labelIDs = append(up.labelIDs, v)
				}
				if len(up.labelIDs) > library.MaxBatchIDs {
					return fail(http.StatusBadRequest, "too many labels")
				}
			}
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(p, 1<<20))
		}
	}
	if up.staged == "" {
		return fail(http.StatusBadRequest, "File is required")
	}
	if up.format, err = ParseFormat(typ); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if len(up.labelIDs) > 0 {
		ls, err := library.Of(u.store).LabelsByID(r.Context(), m.ID, up.labelIDs)
		if err != nil || len(ls) != len(up.labelIDs) {
			return fail(http.StatusBadRequest, "labelIds must be ids of your labels")
		}
	}
	return up, 0, ""
}

var importTmpl = template.Must(template.New("import.html").Funcs(template.FuncMap{
	"describe": func(f any) string { return Describe(Format(fmt.Sprint(f))) },
	"add":      func(a, b int) int { return a + b },
	"percent": func(j *library.ImportJob) int {
		if j.Total == 0 {
			return 0
		}
		return j.Position * 100 / j.Total
	},
	"left": func(p Progress) string {
		d := p.Left
		switch {
		case d <= 0:
			return ""
		case d < time.Minute:
			return "less than a minute"
		case d < time.Hour:
			return fmt.Sprintf("about %d minutes", int(d.Minutes()+0.5))
		}
		return fmt.Sprintf("about %.1f hours", d.Hours())
	},
}).ParseFS(templates, "templates/import.html"))

// Page returns the Import settings page, for pages: the formats, an upload form
// (posting to UploadPath), and the member's imports with their progress,
// failures and time left. While one runs the page asks to be reloaded
// every few seconds (a Refresh header: no script needed), until its
// entries are written and the pages it queued are fetched.
func (u *Uploads) Page(pages *account.Pages) account.SettingsPage {
	return pages.MemberPage(PagePath, PageTitle, func(w http.ResponseWriter, r *http.Request, m *members.Member) {
		if r.URL.Path != PagePath {
			pages.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			http.Error(w, "This page can only be opened; the form posts to "+UploadPath+".", http.StatusMethodNotAllowed)
			return
		}
		u.renderPage(w, r, m, http.StatusOK, "")
	})
}

// importJobView is a job and its progress (ProgressOf).
type importJobView struct {
	*library.ImportJob
	Progress Progress
}

type importView struct {
	Action    string
	Error     string
	Formats   []Format
	Labels    []*library.Label
	Jobs      []importJobView
	Running   bool
	MaxUpload int64
	Limits    Limits
}

func (u *Uploads) renderPage(w http.ResponseWriter, r *http.Request, m *members.Member, status int, errMsg string) {
	v := &importView{Action: UploadPath, Error: errMsg, Formats: Formats, Limits: u.runner.Limits()}
	v.MaxUpload = v.Limits.MaxUploadBytes >> 20
	var err error
	var jobs []*library.ImportJob
	if v.Labels, err = library.Of(u.store).Labels(r.Context(), m.ID); err == nil {
		jobs, err = library.Of(u.store).ImportJobs(r.Context(), m.ID)
	}
	if err != nil {
		if st, _, ok := inboxtapi.Refusal(w, err); ok {
			status, v.Error = st, "Your imports cannot be listed now; try again later."
		} else {
			u.log.Error("list imports", zap.Error(err))
			status, v.Error = http.StatusInternalServerError, "Your imports could not be listed; try again."
		}
	}
	now := time.Now()
	for _, j := range jobs {
		jv := importJobView{j, ProgressOf(j, now)}
		v.Running = v.Running || jv.Progress.Working
		v.Jobs = append(v.Jobs, jv)
	}
	if v.Running {
		w.Header().Set("Refresh", "5; url="+PagePath)
	}
	if u.pages != nil {
		u.pages.Render(w, r, status, PageTitle, importTmpl, v)
	}
}
