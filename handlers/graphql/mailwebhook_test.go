package graphql_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
)

const webhookSecret = "whsec-4f1d9a7c2b8e"

func webhookEnv(t *testing.T, logs **observer.ObservedLogs) (*env, string) {
	t.Helper()
	opts := options{MailWebhookSecret: webhookSecret, MailDomain: "in.example.org"}
	if logs != nil {
		core, obs := observer.New(zap.DebugLevel)
		*logs = obs
		opts.Logger = zap.New(core)
	}
	e := newEnv(t, opts)
	if _, err := apitokens.Of(e.store).RotateInboundSecret(t.Context(), e.member.ID, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	in, err := apitokens.Of(e.store).InboundInfo(t.Context(), e.member.ID)
	if err != nil {
		t.Fatal(err)
	}
	return e, in.ID + "@in.example.org"
}

func postWebhook(t *testing.T, e *env, body string, auth func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+inbound.MailWebhookPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != nil {
		auth(req)
	}
	resp, b := send(t, req)
	return resp.StatusCode, string(b)
}

func withHeader(r *http.Request) { r.Header.Set("X-Webhook-Secret", webhookSecret) }

// The payload shapes Inboxt's newsletter.service.ts reads (extractRecipient,
// extractSubject, extractMessageId, extractHtml, extractText, extractAuthor;
// Inboxt/inboxt@45f4314) and addNewsletterFromEmail's array and items forms.
func webhookPayloads(rcpt string) map[string]string {
	body := strings.Repeat("Sourdough starters need feeding twice a day. ", 10)
	return map[string]string{
		"plain": `{"recipient":"` + rcpt + `","from":"Bread Weekly <news@bread.example>","subject":"Issue 1","messageId":"<m1@bread.example>","html":"<p>` + body + `</p>","text":"` + body + `"}`,
		"postmark": `{"OriginalRecipient":"` + rcpt + `","FromFull":{"Email":"news@bread.example","Name":"Bread Weekly"},"ToFull":[{"Email":"` + rcpt + `"}],
			"Subject":"Issue 2","MessageID":"m2-postmark","HtmlBody":"<div>` + body + `</div>","TextBody":"` + body + `"}`,
		"brevo": `{"items":[{"Recipients":["` + rcpt + `"],"Subject":"Issue 3","MessageId":"<m3@bread.example>","RawHtmlBody":"<p>` + body + `</p>",
			"RawTextBody":"` + body + `","From":{"Name":"Bread Weekly","Address":"news@bread.example"}}]}`,
		"sparkpost": `[{"msys":{"relay_message":{"rcpt_to":"` + rcpt + `","friendly_from":"Bread Weekly <news@bread.example>","msg_from":"news@bread.example",
			"content":{"subject":"Issue 4","html":"<p>` + body + `</p>","text":"` + body + `","Message-ID":"<m4@bread.example>"}}}}]`,
		"headers": `{"headers":{"To":["Member <` + rcpt + `>"],"From":["\"Bread Weekly\" <news@bread.example>"],"Subject":["Issue 5"],"Message-ID":["<m5@bread.example>"]},
			"body":{"plaintext":"` + body + `"}}`,
	}
}

func TestMailWebhookSavesEachProvidersPayload(t *testing.T) {
	e, rcpt := webhookEnv(t, nil)
	want := map[string]string{"plain": "Issue 1", "postmark": "Issue 2", "brevo": "Issue 3", "sparkpost": "Issue 4", "headers": "Issue 5"}
	for name, payload := range webhookPayloads(rcpt) {
		t.Run(name, func(t *testing.T) {
			status, body := postWebhook(t, e, payload, withHeader)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var got struct{ IDs []string }
			if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.IDs) != 1 {
				t.Fatalf("answer %s", body)
			}
			var one struct {
				SavedItem struct {
					Title, Type, Author string
					SourceDomain        *string
					Newsletter          struct{ ContentText, ContentHTML string }
				}
			}
			e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": got.IDs[0]}}, &one)
			it := one.SavedItem
			if it.Title != want[name] || it.Type != "NEWSLETTER" || it.Author != "Bread Weekly" ||
				it.SourceDomain == nil || *it.SourceDomain != "bread.example" ||
				!strings.Contains(it.Newsletter.ContentText, "Sourdough starters") || !strings.Contains(it.Newsletter.ContentHTML, "Sourdough starters") {
				t.Fatalf("item = %+v", it)
			}
		})
	}
	// Sub-addressing and case: id+tag@DOMAIN is the member's address too.
	local, domain, _ := strings.Cut(rcpt, "@")
	tagged := strings.Replace(webhookPayloads(local + "+bread@" + strings.ToUpper(domain))["plain"], "m1@bread.example", "m6@bread.example", 1)
	if status, body := postWebhook(t, e, tagged, withHeader); status != http.StatusOK {
		t.Fatalf("tagged address: %d %s", status, body)
	}
	// Delivered again (providers retry): the same item, not a second one.
	payloads := webhookPayloads(rcpt)
	_, first := postWebhook(t, e, payloads["brevo"], withHeader)
	status, again := postWebhook(t, e, payloads["brevo"], withHeader)
	if status != http.StatusOK || again != first {
		t.Fatalf("again: %d %s, first %s", status, again, first)
	}
	if got := e.allEntries(map[string]any{"first": 50, "q": "type:newsletter"}); len(got) != 6 {
		t.Fatalf("%d newsletters, want 6", len(got))
	}
}

func TestMailWebhookTakesTheSecretInTheHeaderOrBasicAuthOnly(t *testing.T) {
	var logs *observer.ObservedLogs
	e, rcpt := webhookEnv(t, &logs)
	payload := webhookPayloads(rcpt)["plain"]
	for name, auth := range map[string]func(*http.Request){
		"none":         nil,
		"wrong header": func(r *http.Request) { r.Header.Set("X-Webhook-Secret", webhookSecret+"x") },
		"wrong basic":  func(r *http.Request) { r.SetBasicAuth("inboxt", "nope") },
		"bearer":       func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+webhookSecret) },
	} {
		status, body := postWebhook(t, e, payload, auth)
		if status != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHORIZED") {
			t.Fatalf("%s: %d %s", name, status, body)
		}
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatalf("stored %d items without the secret", len(got))
	}
	if status, body := postWebhook(t, e, payload, func(r *http.Request) { r.SetBasicAuth("anyone", webhookSecret) }); status != http.StatusOK {
		t.Fatalf("basic: %d %s", status, body)
	}
	if status, body := postWebhook(t, e, webhookPayloads(rcpt)["postmark"], withHeader); status != http.StatusOK {
		t.Fatalf("header: %d %s", status, body)
	}
	for _, entry := range logs.All() {
		b, _ := json.Marshal(entry.ContextMap())
		if strings.Contains(entry.Message+string(b), webhookSecret) {
			t.Fatalf("the secret was logged: %s %s", entry.Message, b)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("nothing logged: the check above saw nothing")
	}
}

func TestMailWebhookRefusesUnknownRecipientsStoringNothing(t *testing.T) {
	e, rcpt := webhookEnv(t, nil)
	local := strings.Split(rcpt, "@")[0]
	good := webhookPayloads(rcpt)["plain"]
	for name, c := range map[string]struct {
		payload string
		status  int
	}{
		"unknown id":       {webhookPayloads("12345@in.example.org")["plain"], http.StatusNotFound},
		"other domain":     {webhookPayloads(local + "@elsewhere.example")["plain"], http.StatusNotFound},
		"secret as local":  {webhookPayloads("nl_x@in.example.org")["plain"], http.StatusNotFound},
		"no recipient":     {`{"subject":"x","html":"<p>x</p>"}`, http.StatusBadRequest},
		"one bad in batch": {`[` + good + `,` + webhookPayloads("999@in.example.org")["plain"] + `]`, http.StatusNotFound},
		"no content":       {`{"recipient":"` + rcpt + `","subject":"empty"}`, http.StatusBadRequest},
		"not JSON":         {`From: a@b`, http.StatusBadRequest},
		"empty array":      {`[]`, http.StatusBadRequest},
	} {
		status, body := postWebhook(t, e, c.payload, withHeader)
		if status != c.status || !strings.Contains(body, `"errors"`) {
			t.Fatalf("%s: %d %s", name, status, body)
		}
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatalf("stored %d items", len(got))
	}
	// A rotated address stops receiving at once.
	if _, err := apitokens.Of(e.store).RotateInboundSecret(t.Context(), e.member.ID, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	if status, body := postWebhook(t, e, good, withHeader); status != http.StatusNotFound {
		t.Fatalf("old address after rotation: %d %s", status, body)
	}
}

func TestMailWebhookIsOffWithoutASecret(t *testing.T) {
	e := newEnv(t, options{MailDomain: "in.example.org"})
	if _, err := apitokens.Of(e.store).RotateInboundSecret(t.Context(), e.member.ID, e.srv.URL); err != nil {
		t.Fatal(err)
	}
	in, _ := apitokens.Of(e.store).InboundInfo(t.Context(), e.member.ID)
	status, body := postWebhook(t, e, webhookPayloads(in.ID + "@in.example.org")["plain"], withHeader)
	if status != http.StatusNotFound || !strings.Contains(body, "not enabled") {
		t.Fatalf("%d %s", status, body)
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatalf("stored %d items", len(got))
	}
}

// Inboxt's web app shows the webhook as appUrl + "/inbox/items/mail-webhook"
// (no /api): a provider set up from what the app shows delivers there too.
func TestMailWebhookTakesThePathInboxtsWebAppShows(t *testing.T) {
	e, rcpt := webhookEnv(t, nil)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+inbound.AppMailWebhookPath, strings.NewReader(webhookPayloads(rcpt)["plain"]))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	withHeader(req)
	resp, b := send(t, req)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ids"`) {
		t.Fatalf("POST %s: %d %s", inbound.AppMailWebhookPath, resp.StatusCode, b)
	}
	if got := e.allEntries(map[string]any{"first": 50, "q": "type:newsletter"}); len(got) != 1 || got[0].Title != "Issue 1" {
		t.Fatalf("newsletters = %+v", got)
	}
	// Other methods there are the site's (the web app's own pages).
	get, _ := http.NewRequest(http.MethodGet, e.srv.URL+inbound.AppMailWebhookPath, nil)
	if e.handles(get) {
		t.Fatalf("GET %s is taken", inbound.AppMailWebhookPath)
	}
}
