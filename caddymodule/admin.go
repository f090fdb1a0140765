package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/directory"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func init() {
	caddy.RegisterModule(AdminAPI{})

	registerAdminEndpoint("/hearth/status", adminMethods{http.MethodGet: adminStatus})
	registerAdminEndpoint("/hearth/backup", adminMethods{http.MethodGet: adminBackup})
	registerAdminEndpoint("/hearth/restore", adminMethods{http.MethodPost: adminRestore})
	registerAdminEndpoint("/hearth/members", adminMethods{
		http.MethodGet:  adminListMembers,
		http.MethodPost: adminCreateMember,
	})
	registerAdminEndpoint("/hearth/members/{username}", adminMethods{
		http.MethodGet:    adminGetMember,
		http.MethodDelete: adminDeleteMember,
	})
	registerAdminEndpoint("/hearth/members/{username}/suspend", adminMethods{http.MethodPost: adminSuspend(true)})
	registerAdminEndpoint("/hearth/members/{username}/unsuspend", adminMethods{http.MethodPost: adminSuspend(false)})
	registerAdminEndpoint("/hearth/members/{username}/password", adminMethods{http.MethodPut: adminSetPassword})
}

// AdminAPI is the admin.api.hearth module: Hearth's routes under /hearth/ on
// Caddy's admin endpoint. Admin modules are provisioned before apps, so the
// routes find the running hearth app (and its store) at request time.
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.hearth",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Routes returns the one route Caddy's admin mux sees; Hearth's own mux
// dispatches below it.
func (AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/hearth/", Handler: caddy.AdminHandlerFunc(serveAdmin)}}
}

// adminFunc serves one method of an admin endpoint. It gets the running
// hearth app; errors it returns should be caddy.APIError values (see
// apiError), which Caddy's admin server writes as {"error": "..."}.
type adminFunc func(w http.ResponseWriter, r *http.Request, app *App) error

// adminMethods maps an HTTP method to its adminFunc.
type adminMethods map[string]adminFunc

// MaxAdminBody is the largest request body an admin route accepts.
const MaxAdminBody = 64 << 10

var adminMux = struct {
	sync.Mutex
	mux     *http.ServeMux
	methods map[string]adminMethods
}{mux: http.NewServeMux(), methods: map[string]adminMethods{}}

type adminResultKey struct{}

// registerAdminEndpoint adds an endpoint to admin.api.hearth. pattern is a
// net/http ServeMux path pattern under /hearth/ (wildcards such as
// {username} are read with r.PathValue). Other files of this package call it
// from their init() to add their own routes (agents, API tokens, ...).
// Requests with a method not in methods get 405 with an Allow header.
func registerAdminEndpoint(pattern string, methods adminMethods) {
	if !strings.HasPrefix(pattern, "/hearth/") {
		panic("hearth admin route outside /hearth/: " + pattern)
	}
	adminMux.Lock()
	defer adminMux.Unlock()
	adminMux.methods[pattern] = methods
	allowed := make([]string, 0, len(methods))
	for m := range methods {
		allowed = append(allowed, m)
	}
	sort.Strings(allowed)
	allow := strings.Join(allowed, ", ")
	adminMux.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		res := r.Context().Value(adminResultKey{}).(*error)
		fn, ok := methods[r.Method]
		if !ok {
			w.Header().Set("Allow", allow)
			*res = apiError(http.StatusMethodNotAllowed, "method %s not allowed here; use %s", r.Method, allow)
			return
		}
		app, err := runningApp()
		if err != nil {
			*res = err
			return
		}
		*res = fn(w, r, app)
	})
}

func serveAdmin(w http.ResponseWriter, r *http.Request) error {
	adminMux.Lock()
	mux := adminMux.mux
	adminMux.Unlock()
	if _, pattern := mux.Handler(r); pattern == "" {
		return apiError(http.StatusNotFound, "no hearth admin route %s", r.URL.Path)
	}
	var res error
	mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminResultKey{}, &res)))
	var apiErr caddy.APIError
	if r.Method == http.MethodGet && errors.As(res, &apiErr) && apiErr.HTTPStatus == http.StatusNotFound {
		// A lookup that finds nothing is an answer, not a failure: Caddy
		// would log every returned error as one ("request error"), and the
		// CLI's check that a name is free before `member add` would leave
		// an error line in the server's log. Same body as Caddy's.
		return writeJSON(w, http.StatusNotFound, map[string]string{"error": apiErr.Message})
	}
	return res
}

// runningApp returns the hearth app of the running config.
func runningApp() (*App, error) {
	v, err := caddy.ActiveContext().AppIfConfigured("hearth")
	if err != nil || v == nil {
		return nil, apiError(http.StatusServiceUnavailable,
			"the hearth app is not running: the loaded config has no hearth global option and no Hearth handler")
	}
	app, ok := v.(*App)
	if !ok || app.Store() == nil {
		return nil, apiError(http.StatusServiceUnavailable, "the hearth app is not running")
	}
	if err := app.start(); err != nil {
		return nil, apiError(http.StatusServiceUnavailable, "the hearth app is not running: %v", err)
	}
	return app, nil
}

// apiError is a caddy.APIError whose message is shown to the client.
func apiError(status int, format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	return caddy.APIError{HTTPStatus: status, Err: errors.New(msg), Message: msg}
}

// storeError maps a storage error to the admin API's answer.
func storeError(err error, what string) error {
	var inv *storage.InvalidError
	switch {
	case errors.As(err, &inv):
		return apiError(http.StatusBadRequest, "%s", inv.Msg)
	case errors.Is(err, storage.ErrNotFound):
		return apiError(http.StatusNotFound, "%s not found", what)
	case errors.Is(err, storage.ErrConflict):
		return apiError(http.StatusConflict, "%s already exists", what)
	case errors.Is(err, members.ErrSuspended):
		return apiError(http.StatusForbidden, "the member is suspended; unsuspend them first")
	}
	if status, _, ok := storage.Unavailable(err); ok {
		return apiError(status, "%v", err) // a restore, a reload, a full disk: retry later
	}
	return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err, Message: "store error; see the Caddy log"}
}

// decodeJSONBody decodes r's body into v strictly: at most MaxAdminBody
// bytes, one JSON object, no unknown fields.
func decodeJSONBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAdminBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return apiError(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", MaxAdminBody)
		}
		return apiError(http.StatusBadRequest, "reading request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return apiError(http.StatusBadRequest, "request body must be a JSON object")
		}
		return apiError(http.StatusBadRequest, "invalid JSON body: %v", err)
	}
	if dec.More() {
		return apiError(http.StatusBadRequest, "invalid JSON body: more than one value")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return apiError(http.StatusBadRequest, "invalid JSON body: trailing data")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// memberView is a member as the admin API shows it: never the password hash.
type memberView struct {
	ID          string    `json:"id"`
	Username    string    `json:"username"`
	DisplayName string    `json:"display_name"`
	CreatedAt   time.Time `json:"created_at"`
	Suspended   bool      `json:"suspended"`
	// What the OpenID provider tells the site's apps.
	Email         string   `json:"email,omitempty"`
	EmailVerified bool     `json:"email_verified,omitempty"`
	Groups        []string `json:"groups,omitempty"`
}

func viewMember(m *members.Member) memberView {
	return memberView{ID: m.ID, Username: m.Username, DisplayName: m.DisplayName, CreatedAt: m.CreatedAt, Suspended: m.Suspended,
		Email: m.Email, EmailVerified: m.EmailVerified, Groups: m.Groups}
}

func adminStatus(w http.ResponseWriter, _ *http.Request, app *App) error {
	return writeJSON(w, http.StatusOK, map[string]any{
		"storage_dir":       app.Store().Path(),
		"store_opens":       storeOpens.Load(),
		"open_registration": app.OpenRegistration,
	})
}

// BackupStatusTrailer is the HTTP trailer GET /hearth/backup sets to "ok"
// once the whole stream was written; a response without it is incomplete.
const BackupStatusTrailer = "Hearth-Backup-Status"

func adminBackup(w http.ResponseWriter, _ *http.Request, app *App) error {
	w.Header().Set("Trailer", BackupStatusTrailer)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="hearth.backup"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := app.Store().Backup(w); err != nil {
		// The status line is gone; the missing trailer tells the client.
		app.logger.Error("backup stream failed")
		w.Header().Set(BackupStatusTrailer, "failed")
		return nil
	}
	w.Header().Set(BackupStatusTrailer, "ok")
	return nil
}

// adminRestore is POST /hearth/restore: the body is a backup written by GET
// /hearth/backup, which the running store is brought to (storage.Replace).
// Input that is not a complete backup is 400 and changes nothing.
func adminRestore(w http.ResponseWriter, r *http.Request, app *App) error {
	// Loading a large backup outlasts the admin server's read timeout.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	prev, err := app.Store().Replace(r.Body)
	if errors.Is(err, storage.ErrNotBackup) {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	if errors.Is(err, storage.ErrRestoreRunning) {
		return apiError(http.StatusConflict, "another restore is running; try again when it has finished")
	}
	if status, _, ok := storage.Unavailable(err); ok {
		return apiError(status, "%v", err) // the store closed (a reload) or the disk is full
	}
	// The store may have changed, also when the restore failed part-way:
	// every directory on every node of the store rebuilds its document and
	// restarts its relay subscriptions for the restored agents.
	if perr := directory.StoreChanged(r.Context(), app.Store()); perr != nil {
		app.logger.Warn("tell the directories of a restore", zap.Error(perr))
		for _, d := range app.directories() {
			d.AuthorsChanged()
		}
	}
	if err != nil {
		app.logger.Error("restore", zap.Error(err))
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err, Message: "restore failed: " + err.Error()}
	}
	app.logger.Info("restored the store from a backup", zap.String("previous_records", prev))
	return writeJSON(w, http.StatusOK, map[string]string{"previous": prev})
}

func adminListMembers(w http.ResponseWriter, r *http.Request, app *App) error {
	ms, err := members.Of(app.Store()).Members(r.Context())
	if err != nil {
		return storeError(err, "member")
	}
	out := make([]memberView, 0, len(ms))
	for _, m := range ms {
		out = append(out, viewMember(m))
	}
	return writeJSON(w, http.StatusOK, out)
}

type createMemberRequest struct {
	Username    string `json:"username"`
	Password    string `json:"password"`
	DisplayName string `json:"display_name"`
}

func adminCreateMember(w http.ResponseWriter, r *http.Request, app *App) error {
	var req createMemberRequest
	if err := decodeJSONBody(w, r, &req); err != nil {
		return err
	}
	if req.Username == "" {
		return apiError(http.StatusBadRequest, "username is required")
	}
	if req.Password == "" {
		return apiError(http.StatusBadRequest, "password is required")
	}
	m, err := members.Of(app.Store()).CreateMember(r.Context(), req.Username, req.DisplayName, req.Password)
	if errors.Is(err, storage.ErrConflict) {
		return apiError(http.StatusConflict, "username %q is taken", req.Username)
	}
	if err != nil {
		return storeError(err, "member")
	}
	w.Header().Set("Location", "/hearth/members/"+m.Username)
	return writeJSON(w, http.StatusCreated, viewMember(m))
}

// memberError is the admin API's answer to err, from the store about the
// member username: 404 when there is no such member.
func memberError(username string, err error) error {
	if !errors.Is(err, storage.ErrNotFound) {
		return storeError(err, "member")
	}
	if members.ValidateUsername(username) != nil {
		return apiError(http.StatusNotFound, "no member with that username")
	}
	return apiError(http.StatusNotFound, "no member %q", username)
}

func adminGetMember(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, viewMember(m))
}

func adminSuspend(suspended bool) adminFunc {
	return func(w http.ResponseWriter, r *http.Request, app *App) error {
		name := r.PathValue("username")
		m, err := members.Of(app.Store()).SetSuspended(r.Context(), name, suspended)
		if err != nil {
			return memberError(name, err)
		}
		return writeJSON(w, http.StatusOK, viewMember(m))
	}
}

type setPasswordRequest struct {
	Password string `json:"password"`
}

func adminSetPassword(w http.ResponseWriter, r *http.Request, app *App) error {
	name := r.PathValue("username")
	var req setPasswordRequest
	if err := decodeJSONBody(w, r, &req); err != nil {
		return err
	}
	if req.Password == "" {
		return apiError(http.StatusBadRequest, "password is required")
	}
	err := members.Of(app.Store()).SetPassword(r.Context(), name, req.Password)
	if err != nil {
		return memberError(name, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func adminDeleteMember(w http.ResponseWriter, r *http.Request, app *App) error {
	name := r.PathValue("username")
	err := members.Of(app.Store()).DeleteMember(r.Context(), name)
	if err != nil {
		return memberError(name, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Interface guards
var _ caddy.AdminRouter = (*AdminAPI)(nil)
