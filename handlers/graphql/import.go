package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Imports: POST ImportPath takes a file as Inboxt's web app sends it
// (multipart fields file, type, labelIds: apps/web/src/modals/ImportModal/
// ImportModal.tsx, and the controller apps/api/src/modules/import/
// import.controller.ts, Inboxt/inboxt@45f4314), for a member signed in
// with the session cookie (same-origin only) or with a token. The file is
// staged and checked before anything is written; the import then runs in
// the background (handlers/importer.Runner) and the Import settings page,
// the importJobs query and `caddy hearth import` show its progress.

// Paths of imports.
const (
	ImportPath      = "/api/import"
	ImportPagePath  = "/settings/import"
	ImportPageTitle = "Import"
)

// Importer is the server's import runner (the admin API starts imports
// through it).
func (s *Server) Importer() *importer.Runner { return s.articles.Importer() }

// writeImportError answers in Inboxt's REST error shape, naming the
// request's path as shownPath shows it.
func writeImportError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	inboxtapi.WriteREST(w, status, msg, shownPath(r.URL.Path))
}

// restCaller is the caller of a request to one of the REST routes
// (inboxtapi.Gate.RESTCaller); nil when it answered.
func (s *Server) restCaller(w http.ResponseWriter, r *http.Request, route access.Route, what string) *caller {
	return s.gate.RESTCaller(w, r, route, what, shownPath(r.URL.Path))
}

// shownPath is the path an error names: a feed URL's secret is its only
// credential, so it is never written back (the response may be kept by a
// feed reader, a proxy or a log that the URL itself stays out of).
func shownPath(p string) string {
	rest, ok := strings.CutPrefix(p, FeedPath)
	if !ok {
		return p
	}
	_, after, _ := strings.Cut(rest, "/")
	return FeedPath + "SECRET/" + after
}

// importUpload is what a POST to ImportPath carries.
type importUpload struct {
	staged, fileName string
	format           importer.Format
	labelIDs         []string
	fromPage         bool
}

func (s *Server) serveImport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeImportError(w, r, http.StatusMethodNotAllowed, "use POST with a multipart/form-data body (file, type, labelIds)")
		return
	}
	c := s.restCaller(w, r, routeImport, "take an import")
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
			s.renderImportPage(w, r, c.Member, status, msg)
			return
		}
		writeImportError(w, r, status, msg)
	}
	if _, busy := s.uploading.LoadOrStore(c.Member.ID, struct{}{}); busy {
		refuse(http.StatusConflict, "another upload of yours is being received; wait for it to finish")
		return
	}
	defer s.uploading.Delete(c.Member.ID)
	if jobs, err := library.Of(s.store).ImportJobs(r.Context(), c.Member.ID); err == nil {
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
	up, status, msg := s.readImportUpload(w, r, c.Member)
	if up != nil && up.fromPage {
		pageForm = true
	}
	if msg != "" {
		refuse(status, msg)
		return
	}
	job, err := s.articles.Importer().Start(r.Context(), c.Member.ID, up.staged, up.fileName, up.format, up.labelIDs)
	if err != nil {
		status, msg := http.StatusBadRequest, err.Error()
		if !importer.IsFileError(err) && !storage.IsInvalid(err) {
			if st, _, ok := refusal(w, err); ok {
				status, msg = st, "the store cannot take an import now; try again later"
			} else {
				s.log.Error("start import", zap.Error(err))
				status, msg = http.StatusInternalServerError, "the import could not be started; try again"
			}
		}
		refuse(status, msg)
		return
	}
	s.log.Info("import started", zap.String("member", c.Member.Username), zap.String("job", job.ID),
		zap.String("format", job.Format), zap.Int("entries", job.Total))
	if up.fromPage {
		// No fragment (#job-…): the page reloads itself with a Refresh
		// header, and a refresh to a URL with a fragment is an in-page jump
		// that never reloads.
		http.Redirect(w, r, ImportPagePath, http.StatusSeeOther)
		return
	}
	// Inboxt answers VOID_RESPONSE ({success: true}) with Nest's 201;
	// the job's id and entry count are Hearth's additions.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"success": true, "jobId": job.ID, "format": job.Format, "total": job.Total})
}

// readImportUpload streams the multipart body: the file to the staging
// directory (refused past the upload limit, before anything else is
// written), the type and the label ids. A message means refused.
func (s *Server) readImportUpload(w http.ResponseWriter, r *http.Request, m *members.Member) (*importUpload, int, string) {
	lim := s.articles.Importer().Limits()
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
		switch p.FormName() {
		case "file":
			if up.staged != "" {
				return fail(http.StatusBadRequest, "send one file")
			}
			staged, err := s.articles.Importer().Stage(p)
			if err != nil {
				var tooBig *http.MaxBytesError
				if importer.IsFileError(err) || errors.As(err, &tooBig) {
					return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is larger than %d bytes (the import limit)", lim.MaxUploadBytes))
				}
				s.log.Error("stage import", zap.Error(err))
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
			}
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(p, 1<<20))
		}
	}
	if up.staged == "" {
		return fail(http.StatusBadRequest, "File is required")
	}
	if up.format, err = importer.ParseFormat(typ); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if len(up.labelIDs) > library.MaxBatchIDs {
		return fail(http.StatusBadRequest, "too many labels")
	}
	if len(up.labelIDs) > 0 {
		ls, err := library.Of(s.store).LabelsByID(r.Context(), m.ID, up.labelIDs)
		if err != nil || len(ls) != len(up.labelIDs) {
			return fail(http.StatusBadRequest, "labelIds must be ids of your labels")
		}
	}
	return up, 0, ""
}

var importTmpl = template.Must(template.New("import.html").Funcs(template.FuncMap{
	"describe": func(f any) string { return importer.Describe(importer.Format(fmt.Sprint(f))) },
	"add":      func(a, b int) int { return a + b },
	"percent": func(j *library.ImportJob) int {
		if j.Total == 0 {
			return 0
		}
		return j.Position * 100 / j.Total
	},
	"left": func(p importer.Progress) string {
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

// ImportPage returns the Import settings page: the formats, an upload form
// (posting to ImportPath), and the member's imports with their progress,
// failures and time left. While one runs the page asks to be reloaded
// every few seconds (a Refresh header: no script needed), until its
// entries are written and the pages it queued are fetched.
func (s *Server) ImportPage(pages *account.Pages) account.SettingsPage {
	return account.SettingsPage{
		Path:  ImportPagePath,
		Title: ImportPageTitle,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m := pages.CurrentMember(r)
			if m == nil {
				pages.RequireMember(w, r)
				return
			}
			if r.URL.Path != ImportPagePath {
				http.NotFound(w, r)
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET")
				http.Error(w, "This page can only be opened; the form posts to "+ImportPath+".", http.StatusMethodNotAllowed)
				return
			}
			s.renderImportPage(w, r, m, http.StatusOK, "")
		}),
	}
}

// importJobView is a job and its progress (importer.ProgressOf).
type importJobView struct {
	*library.ImportJob
	Progress importer.Progress
}

type importView struct {
	Action    string
	Error     string
	Formats   []importer.Format
	Labels    []*library.Label
	Jobs      []importJobView
	Running   bool
	MaxUpload int64
	Limits    importer.Limits
}

func (s *Server) renderImportPage(w http.ResponseWriter, r *http.Request, m *members.Member, status int, errMsg string) {
	v := &importView{Action: ImportPath, Error: errMsg, Formats: importer.Formats, Limits: s.articles.Importer().Limits()}
	v.MaxUpload = v.Limits.MaxUploadBytes >> 20
	var err error
	var jobs []*library.ImportJob
	if v.Labels, err = library.Of(s.store).Labels(r.Context(), m.ID); err == nil {
		jobs, err = library.Of(s.store).ImportJobs(r.Context(), m.ID)
	}
	if err != nil {
		if st, _, ok := refusal(w, err); ok {
			status, v.Error = st, "Your imports cannot be listed now; try again later."
		} else {
			s.log.Error("list imports", zap.Error(err))
			status, v.Error = http.StatusInternalServerError, "Your imports could not be listed; try again."
		}
	}
	now := time.Now()
	for _, j := range jobs {
		jv := importJobView{j, importer.ProgressOf(j, now)}
		v.Running = v.Running || jv.Progress.Working
		v.Jobs = append(v.Jobs, jv)
	}
	if v.Running {
		w.Header().Set("Refresh", "5; url="+ImportPagePath)
	}
	if s.opts.Pages != nil {
		s.opts.Pages.Render(w, r, status, ImportPageTitle, importTmpl, v)
	}
}

// importFailuresShown is how many failures importJobs lists per import
// (the Import page lists all the store keeps).
const importFailuresShown = 20

// ImportJobs is the Hearth-only importJobs query: the member's imports
// with their progress, for clients that poll after POST /api/import.
func (r *queryResolver) ImportJobs(ctx context.Context) ([]*generated.ImportJob, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	jobs, err := library.Of(r.s.store).ImportJobs(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]*generated.ImportJob, 0, len(jobs))
	for _, j := range jobs {
		g := &generated.ImportJob{
			ID: j.ID, Format: j.Format, FileName: j.FileName, State: generated.ImportState(strings.ToUpper(j.State)),
			Total: j.Total, Done: j.Position, Created: j.Created, Existing: j.Existing, Failed: j.Failed,
			Fetching: j.Fetching, Fetched: j.Fetched, FetchFailed: j.FetchFailed, Failures: []*generated.ImportFailure{},
			CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt,
		}
		if j.Error != "" {
			g.Error = &j.Error
		}
		if d := importer.ProgressOf(j, time.Now()).Left; d > 0 {
			secs := int(d.Seconds() + 0.5)
			g.SecondsLeft = &secs
		}
		for _, f := range j.Failures[:min(len(j.Failures), importFailuresShown)] {
			g.Failures = append(g.Failures, &generated.ImportFailure{Entry: f.Ref, Reason: f.Reason})
		}
		out = append(out, g)
	}
	return out, nil
}
