package graphql_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
)

const newsletterMessage = "From: \"Tech Weekly\" <editor@mail.techweekly.example>\r\n" +
	"To: inbox@example.org\r\n" +
	"Subject: =?UTF-8?Q?Issue_42:_Caf=C3=A9_edition?=\r\n" +
	"Date: Mon, 2 Jun 2025 10:00:00 +0000\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"b1\"\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"\r\n" +
	"This week: caching, queues and coffee.\r\n" +
	"--b1\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"<html><body><h1>Issue 42</h1><p>This week: caching, queues and =\r\n" +
	"coffee.</p></body></html>\r\n" +
	"--b1--\r\n"

func postInbound(t *testing.T, e *env, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "message/rfc822", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func inboundURL(t *testing.T, e *env) string {
	secret, err := apitokens.Of(e.store).RotateInboundSecret(t.Context(), e.member.ID, e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return e.srv.URL + inbound.Path + secret
}

func TestNewsletterPostedToTheInboundURLBecomesANewsletterItem(t *testing.T) {
	e := newEnv(t, options{})
	status, body := postInbound(t, e, inboundURL(t, e), newsletterMessage)
	if status != http.StatusCreated {
		t.Fatalf("status %d: %s", status, body)
	}
	items := e.allEntries(map[string]any{"first": 10, "q": "type:newsletter"})
	if len(items) != 1 {
		t.Fatalf("%d newsletters", len(items))
	}
	it := items[0]
	if it.Typename != "SavedItem" || it.Type != "NEWSLETTER" || it.Title != "Issue 42: Café edition" ||
		it.SourceDomain == nil || *it.SourceDomain != "mail.techweekly.example" || it.OriginalURL != nil {
		t.Fatalf("item = %+v", it)
	}
	var one struct {
		SavedItem struct {
			Newsletter struct{ ContentHTML, ContentText string }
			Article    *struct{}
		}
	}
	e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": it.ID}}, &one)
	nl := one.SavedItem.Newsletter
	if !strings.Contains(nl.ContentHTML, "<h1>Issue 42</h1>") || !strings.Contains(nl.ContentHTML, "queues and coffee.") ||
		!strings.Contains(nl.ContentText, "caching, queues and coffee") || one.SavedItem.Article != nil {
		t.Fatalf("newsletter = %+v", one.SavedItem)
	}
}

func TestMalformedNewsletterIs400AndNothingIsStored(t *testing.T) {
	e := newEnv(t, options{})
	url := inboundURL(t, e)
	for name, msg := range map[string]string{
		"not a message":       "hello there",
		"no From":             "Subject: hi\r\n\r\nbody\r\n",
		"bad From":            "From: <<nobody>>\r\nSubject: hi\r\n\r\nbody\r\n",
		"no boundary":         "From: a@b.example\r\nContent-Type: multipart/mixed\r\n\r\nbody\r\n",
		"truncated multipart": "From: a@b.example\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nbody",
		"only an image":       "From: a@b.example\r\nContent-Type: image/png\r\n\r\nPNG",
		// Each part costs the MIME reader ~800 bytes: a 9 MiB message of
		// empty parts allocated 203 MiB before it was refused.
		"too many parts": "From: a@b.example\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n" +
			strings.Repeat("--x\r\nContent-Type: image/png\r\n\r\n\r\n", 1001) + "--x\r\nContent-Type: text/plain\r\n\r\nbody\r\n--x--\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			status, body := postInbound(t, e, url, msg)
			if status != http.StatusBadRequest || !strings.Contains(body, "malformed message") {
				t.Fatalf("status %d: %s", status, body)
			}
		})
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatalf("%d items stored", len(got))
	}
}

func TestInboundURLWithUnknownOrReplacedSecretIs404(t *testing.T) {
	e := newEnv(t, options{})
	old := inboundURL(t, e)
	_ = inboundURL(t, e) // a new address replaces the old one
	if status, _ := postInbound(t, e, old, newsletterMessage); status != http.StatusNotFound {
		t.Fatalf("old address: status %d", status)
	}
	if status, _ := postInbound(t, e, e.srv.URL+inbound.Path+"nl_unknownunknownunknown", newsletterMessage); status != http.StatusNotFound {
		t.Fatalf("unknown address: status %d", status)
	}
}

// withMessageID puts a Message-ID header on top of newsletterMessage.
func withMessageID(id string) string { return "Message-ID: " + id + "\r\n" + newsletterMessage }

func TestNewsletterDeliveredTwiceIsSavedOnce(t *testing.T) {
	e := newEnv(t, options{})
	url := inboundURL(t, e)
	status, first := postInbound(t, e, url, withMessageID("<Issue-42.1@Mail.TechWeekly.example>"))
	if status != http.StatusCreated || !strings.Contains(first, `"id":"`) {
		t.Fatalf("first delivery: status %d: %s", status, first)
	}
	// A retry, the header folded and the domain in another case: the same
	// answer, nothing new.
	status, again := postInbound(t, e, url, withMessageID("\r\n <Issue-42.1@mail.techweekly.EXAMPLE>"))
	if status != http.StatusCreated || again != first {
		t.Fatalf("repeat: status %d %s, want 201 %s", status, again, first)
	}
	if got := e.allEntries(map[string]any{"first": 10, "q": "type:newsletter"}); len(got) != 1 {
		t.Fatalf("%d newsletters after a repeated delivery, want 1", len(got))
	}
	// The id's left part is compared as it is.
	if status, other := postInbound(t, e, url, withMessageID("<issue-42.1@mail.techweekly.example>")); status != http.StatusCreated || other == first {
		t.Fatalf("another message id: status %d %s", status, other)
	}
	// Without a Message-ID each delivery is a new item.
	postInbound(t, e, url, newsletterMessage)
	postInbound(t, e, url, newsletterMessage)
	if got := e.allEntries(map[string]any{"first": 10, "q": "type:newsletter"}); len(got) != 4 {
		t.Fatalf("%d newsletters, want 4", len(got))
	}
	long := "<" + strings.Repeat("x", 1000) + "@news.example>"
	if status, body := postInbound(t, e, url, withMessageID(long)); status != http.StatusBadRequest || !strings.Contains(body, "Message-ID") {
		t.Fatalf("over-long Message-ID: status %d %s", status, body)
	}
}

func TestConcurrentRetriesOfANewsletterSaveOneItem(t *testing.T) {
	e := newEnv(t, options{})
	url := inboundURL(t, e)
	const n = 6
	bodies := make(chan string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(url, "message/rfc822", strings.NewReader(withMessageID("<race@news.example>")))
			if err != nil {
				bodies <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			bodies <- strconv.Itoa(resp.StatusCode) + " " + string(b)
		}()
	}
	wg.Wait()
	close(bodies)
	seen := map[string]bool{}
	for b := range bodies {
		seen[b] = true
	}
	if len(seen) != 1 {
		t.Fatalf("answers differ: %v", seen)
	}
	for b := range seen {
		if !strings.HasPrefix(b, "201 ") {
			t.Fatalf("answer %s", b)
		}
	}
	if got := e.allEntries(map[string]any{"first": 10, "q": "type:newsletter"}); len(got) != 1 {
		t.Fatalf("%d newsletters after %d concurrent deliveries, want 1", len(got), n)
	}
}

func TestDeletedNewsletterIsSavedAgainWhenDeliveredAgain(t *testing.T) {
	e := newEnv(t, options{})
	url := inboundURL(t, e)
	const trash = `mutation($data: UpdateSavedItemsStatusInput!) { updateSavedItemsStatus(data: $data) { id } }`
	idOf := func(body string) string {
		var v struct{ ID string }
		if err := json.Unmarshal([]byte(body), &v); err != nil || v.ID == "" {
			t.Fatalf("inbound answer %q", body)
		}
		return v.ID
	}
	for _, c := range []struct {
		name   string
		delete func(id string)
	}{
		{"permanentlyDeleteSavedItems", func(id string) {
			e.doAs(e.session, `mutation($data: PermanentlyDeleteSavedItemsInput!) { permanentlyDeleteSavedItems(data: $data) { success } }`,
				map[string]any{"data": map[string]any{"ids": []string{id}}}, nil)
		}},
		{"emptyTrash", func(string) { e.doAs(e.session, `mutation { emptyTrash { success count } }`, nil, nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := withMessageID("<" + c.name + "@news.example>")
			_, body := postInbound(t, e, url, msg)
			first := idOf(body)
			e.do(trash, map[string]any{"data": map[string]any{"ids": []string{first}, "status": "DELETED"}}, nil)
			// Still in the trash: a retry is recognised.
			if _, body := postInbound(t, e, url, msg); idOf(body) != first {
				t.Fatalf("retry while in the trash: %s, want %s", body, first)
			}
			c.delete(first)
			status, body := postInbound(t, e, url, msg)
			if status != http.StatusCreated || idOf(body) == first {
				t.Fatalf("after deleting: status %d %s", status, body)
			}
		})
	}
}

// 8-bit newsletters without a MIME charset were refused (400, "description
// must be valid UTF-8") and lost: an HTML part is decoded by its <meta>
// charset, and bytes that are not UTF-8 as windows-1252.
func TestNewsletterIn8BitTextWithoutMIMECharsetIsSaved(t *testing.T) {
	e := newEnv(t, options{})
	url := inboundURL(t, e)
	head := "From: Le Café <news@cafe.example>\r\nSubject: Menu\r\nMIME-Version: 1.0\r\n"
	for name, c := range map[string]struct{ msg, html, text string }{
		"HTML with a meta charset": {
			head + "Content-Type: text/html\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" +
				"<html><head><meta charset=iso-8859-1></head><body><p>Cr\xe8me br\xfbl\xe9e \xe0 5 \x80</p></body></html>\r\n",
			"<p>Crème brûlée à 5 €</p>", "Crème brûlée à 5 €"},
		"HTML with http-equiv, quoted-printable": {
			head + "Content-Type: text/html\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
				"<html><head><meta http-equiv=3D\"Content-Type\" content=3D\"text/html; charset=3Diso-8859-1\"></head>" +
				"<body><p>Cr=E8me br=FBl=E9e</p></body></html>\r\n",
			"<p>Crème brûlée</p>", "Crème brûlée"},
		"Latin-1 text without charset": {
			head + "Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n" +
				"Cr\xe8me br\xfbl\xe9e, caf\xe9 cr\xe8me\r\n--b--\r\n",
			"<p>Crème brûlée, café crème</p>", "Crème brûlée, café crème"},
		"UTF-8 text without charset stays UTF-8": {
			head + "Content-Type: text/plain\r\n\r\nCrème brûlée\r\n",
			"<p>Crème brûlée</p>", "Crème brûlée"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := postInbound(t, e, url, c.msg)
			if status != http.StatusCreated {
				t.Fatalf("status %d: %s", status, body)
			}
			var created struct{ ID string }
			if err := json.Unmarshal([]byte(body), &created); err != nil {
				t.Fatal(err)
			}
			var one struct {
				SavedItem struct {
					Author      string
					Description string
					Newsletter  struct{ ContentHTML, ContentText string }
				}
			}
			e.do(`query($query: GetSavedItemInput!) { savedItem(query: $query) { author description newsletter { contentHtml contentText } } }`,
				map[string]any{"query": map[string]any{"id": created.ID}}, &one)
			it := one.SavedItem
			if !strings.Contains(it.Newsletter.ContentHTML, c.html) || !strings.Contains(it.Newsletter.ContentText, c.text) ||
				!strings.Contains(it.Description, c.text) || it.Author != "Le Café" {
				t.Fatalf("saved as %+v", it)
			}
		})
	}
}

// Inboxt's web app shows the list it re-reads after
// createInboundEmailAddress (EmailsModal.tsx, Inboxt/inboxt@45f4314), not
// the mutation's answer: the browser that made the address gets the whole
// URL in that list (its secret in a cookie sent only to the API), which a
// newsletter can be posted to; other requests see it without its secret.
func TestNewInboundURLIsListedWholeToTheBrowserThatMadeIt(t *testing.T) {
	e := newEnv(t, options{})
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	send := func(query string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/graphql", strings.NewReader(`{"query":"`+query+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(&http.Cookie{Name: account.CookieName, Value: strings.TrimPrefix(e.session, "session:")})
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, made := send(`mutation { createInboundEmailAddress { id fullAddress } }`)
	for _, c := range resp.Cookies() {
		if c.Value != "" && (!c.HttpOnly || c.Path != "/api/graphql" || c.SameSite != http.SameSiteStrictMode) {
			t.Errorf("cookie %s: %+v", c.Name, c)
		}
	}
	var list struct {
		Data struct {
			InboundEmailAddresses []struct{ ID, FullAddress string }
		}
	}
	_, b := send(`{ inboundEmailAddresses { id fullAddress } }`)
	if err := json.Unmarshal([]byte(b), &list); err != nil || len(list.Data.InboundEmailAddresses) != 1 {
		t.Fatalf("list: %v %s", err, b)
	}
	full := list.Data.InboundEmailAddresses[0].FullAddress
	if !strings.Contains(made, full) || !strings.HasPrefix(full, e.srv.URL+inbound.Path+"nl_") || strings.HasSuffix(full, "…") {
		t.Fatalf("listed %q after making %s", full, made)
	}
	if status, body := postInbound(t, e, full, newsletterMessage); status != http.StatusCreated {
		t.Fatalf("posting to the listed URL: %d %s", status, body)
	}
	if items := e.allEntries(map[string]any{"first": 10, "q": "type:newsletter"}); len(items) != 1 {
		t.Fatalf("%d newsletters", len(items))
	}
	var other struct {
		InboundEmailAddresses []struct{ FullAddress string }
	}
	e.doAs(e.session, `{ inboundEmailAddresses { fullAddress } }`, nil, &other)
	if len(other.InboundEmailAddresses) != 1 || other.InboundEmailAddresses[0].FullAddress != e.srv.URL+inbound.Path+"nl_…" {
		t.Fatalf("another request lists %+v", other)
	}
}
