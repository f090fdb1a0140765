package reader

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// SavingPath is the settings page with the bookmarklet.
const SavingPath = "/settings/saving"

type addData struct {
	URL, Title, Error string
	Confirm           bool
	CanAdd            bool
	Labels            []*library.Label
}

// serveAdd is the add form. A GET only shows it, filled in from url, text
// and title (the bookmarklet and the share target land here), so a page
// of another site can never save anything by linking here: saving is the
// member's POST, behind the cross-origin protection.
func (h *Handler) serveAdd(w http.ResponseWriter, r *http.Request, m *members.Member) {
	labels, err := library.Of(h.store).Labels(r.Context(), m.ID)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	d := addData{Labels: labels, CanAdd: h.opts.SaveURL != nil}
	if r.Method != http.MethodPost {
		d.URL = sharedURL(r.FormValue("url"), r.FormValue("text"))
		d.Title = clipRunes(r.FormValue("title"), 300)
		d.Confirm = d.URL != ""
		h.render(w, r, http.StatusOK, "Add a link", addTmpl, d, false)
		return
	}
	if !h.pages.ParseForm(w, r) {
		return
	}
	d.URL = strings.TrimSpace(r.PostFormValue("url"))
	if !d.CanAdd {
		d.Error = "Saving links is not available on this site."
		h.render(w, r, http.StatusNotFound, "Add a link", addTmpl, d, false)
		return
	}
	if d.URL == "" {
		d.Error = "Enter the address of the page to save."
		h.render(w, r, http.StatusBadRequest, "Add a link", addTmpl, d, false)
		return
	}
	if err := h.opts.SaveURL(r.Context(), m.ID, d.URL, r.PostForm["label"]); err != nil {
		msg, ok := articles.MemberMessage(err)
		if !ok {
			h.storeError(w, r, err)
			return
		}
		d.Error = msg
		h.render(w, r, http.StatusBadRequest, "Add a link", addTmpl, d, false)
		return
	}
	http.Redirect(w, r, withOutcome(Path, "added", ""), http.StatusSeeOther)
}

// sharedURL is the link a share sheet or the bookmarklet sent: url, or
// the first http(s) address in text (Android's share sheet puts it there).
func sharedURL(u, text string) string {
	u = strings.TrimSpace(u)
	if isWebURL(u) {
		return clipRunes(u, library.MaxURLLen)
	}
	for _, f := range strings.Fields(text) {
		if isWebURL(f) {
			return clipRunes(f, library.MaxURLLen)
		}
	}
	return ""
}

func isWebURL(s string) bool {
	p, err := url.Parse(s)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

type savingData struct {
	Bookmarklet template.URL
	AddURL      string
}

// SavingPage is the settings page "Save from the browser": the bookmarklet
// (it opens the add form's confirm page with the current page's address)
// and how to install the library as an app with a share target. Add it
// with Pages.AddSettingsPage.
func (h *Handler) SavingPage() account.SettingsPage {
	return account.SettingsPage{
		Path:  SavingPath,
		Title: "Save from the browser",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !h.allow(w, r, http.MethodGet) {
				return
			}
			origin := "https://" + r.Host
			if r.TLS == nil && isLoopback(r.Host) {
				origin = "http://" + r.Host
			}
			add := origin + Path + "/add"
			// A javascript: URL is what a bookmarklet is; it runs on the
			// page the member is reading, never on this one (the policy
			// allows no inline script), and only opens the confirm page.
			js := "javascript:void(location.href=" + jsString(add+"?url=") +
				"+encodeURIComponent(location.href)+'&title='+encodeURIComponent(document.title))"
			h.render(w, r, http.StatusOK, "Save from the browser", savingTmpl,
				savingData{Bookmarklet: template.URL(js), AddURL: add}, false)
		}),
	}
}

func isLoopback(host string) bool {
	h := host
	if i := strings.LastIndex(h, ":"); i > 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// jsString quotes s as a JavaScript string in single quotes.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "<", `\x3c`)
	return "'" + r.Replace(s) + "'"
}
