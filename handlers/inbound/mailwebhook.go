package inbound

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// MailWebhookPath is Inboxt's newsletter webhook: a mail provider's inbound
// parse service POSTs each message received at the site's mail domain as
// JSON (apps/api/src/managers/saved-item-manager/saved-item-manager.controller.ts,
// Inboxt/inboxt@45f4314).
const MailWebhookPath = "/api/inbox/items/mail-webhook"

// DefaultMailWebhookHeader carries the webhook secret (Inboxt's default,
// security.webhookSecretHeader: common/guards/webhook-secret.guard.ts).
const DefaultMailWebhookHeader = "X-Webhook-Secret"

// AppMailWebhookPath is the mail webhook's URL as Inboxt's web app shows
// it (appUrl + "/inbox/items/mail-webhook", without MailWebhookPath's
// /api): a mail provider set up from what the app shows reaches the same
// webhook. Only POST is taken there, so the path is otherwise the site's.
const AppMailWebhookPath = "/inbox/items/mail-webhook"

// IsMailWebhook reports a request for the mail webhook (MailWebhookPath or
// AppMailWebhookPath), whose secret header keeps it out of access logs.
func IsMailWebhook(r *http.Request) bool {
	return r.URL.Path == MailWebhookPath || (r.URL.Path == AppMailWebhookPath && r.Method == http.MethodPost)
}

// maxWebhookMessages bounds the messages of one request.
const maxWebhookMessages = 100

// serveMailWebhook saves the messages of an Inboxt-style webhook request as
// newsletters of the members they are addressed to. The payload is a
// message, an array of them, or {"items": [...]}, each in one of the
// providers' shapes Inboxt reads (newsletter.service.ts extract*). The
// recipient <inbound id>@<MailDomain> names the member. Every message is
// checked before any is saved: an unknown recipient (404) or a message
// without content (400) refuses the request, storing nothing. A message
// whose Message-ID the member already has is not saved again (providers
// retry), and the answer is the same.
func (h *Handler) serveMailWebhook(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if h.opts.WebhookSecret == "" {
		inboxtapi.WriteError(w, http.StatusNotFound, inboxtapi.CodeNotFound, "the mail webhook is not enabled on this site (it has no mail_webhook_secret)")
		return
	}
	if !h.acceptNewsletterPost(w, r, "POST the message as JSON to this URL") {
		return
	}
	if !h.webhookAuthorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="hearth mail webhook"`)
		inboxtapi.WriteError(w, http.StatusUnauthorized, inboxtapi.CodeUnauthorized,
			"send the webhook secret in the "+h.opts.WebhookHeader+" header or as the password of HTTP Basic authentication")
		return
	}
	body, ok := h.readNewsletterBody(w, r, "request")
	if !ok {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var payload any
	if err := dec.Decode(&payload); err != nil {
		inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, "the body must be JSON: a message, an array of messages or {\"items\": [...]}")
		return
	}
	// Inboxt's addNewsletterFromEmail (saved-item-manager.service.ts).
	var msgs []any
	switch p := payload.(type) {
	case []any:
		msgs = p
	case map[string]any:
		if items, ok := p["items"].([]any); ok {
			msgs = items
		} else {
			msgs = []any{p}
		}
	}
	if len(msgs) == 0 || len(msgs) > maxWebhookMessages {
		inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, fmt.Sprintf("the body must hold 1 to %d messages", maxWebhookMessages))
		return
	}
	type delivery struct {
		member *members.Member
		item   library.NewItem
	}
	var ds []delivery
	for i, raw := range msgs {
		msg, ok := raw.(map[string]any)
		if !ok {
			inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, fmt.Sprintf("message %d is not a JSON object", i+1))
			return
		}
		rcpt := webhookRecipient(msg)
		if rcpt == "" {
			inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, fmt.Sprintf("message %d has no recipient", i+1))
			return
		}
		m, err := h.mailMember(r.Context(), rcpt)
		if err != nil {
			if !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, members.ErrSuspended) {
				h.storeFailed(w, err, "look up newsletter address") // nothing was saved
				return
			}
			inboxtapi.WriteError(w, http.StatusNotFound, inboxtapi.CodeNotFound, fmt.Sprintf("message %d: no member has the address %s; nothing was saved", i+1, articles.Clip(rcpt, 320)))
			return
		}
		nl, err := webhookNewsletter(msg)
		if err != nil {
			inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, fmt.Sprintf("message %d: %v; nothing was saved", i+1, err))
			return
		}
		ds = append(ds, delivery{m, nl.item()})
	}
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		it, created, err := h.articles.SaveContent(r.Context(), d.member.ID, d.item)
		if err != nil {
			if storage.IsInvalid(err) && len(ids) == 0 {
				inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, "malformed message: "+err.Error())
				return
			}
			// Those saved before are kept; the provider's retry finds
			// them by their Message-ID.
			h.storeFailed(w, err, "save newsletter from the mail webhook")
			return
		}
		h.log.Info("newsletter received by the mail webhook", zap.String("member", d.member.Username),
			zap.String("item", it.ID), zap.Bool("again", !created))
		ids = append(ids, it.ID)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ids": ids})
}

// webhookAuthorized checks the secret in the configured header or as the
// password of HTTP Basic authentication (any user name), in constant time.
func (h *Handler) webhookAuthorized(r *http.Request) bool {
	want := sha256.Sum256([]byte(h.opts.WebhookSecret))
	check := func(got string) bool {
		g := sha256.Sum256([]byte(got))
		return got != "" && subtle.ConstantTimeCompare(g[:], want[:]) == 1
	}
	if v := r.Header.Get(h.opts.WebhookHeader); v != "" && check(v) {
		return true
	}
	if _, pw, ok := r.BasicAuth(); ok && check(pw) {
		return true
	}
	return false
}

// mailMember is the member whose newsletter address is addr: their
// inbound address id (optionally +tag) at the site's mail domain, any case.
func (h *Handler) mailMember(ctx context.Context, addr string) (*members.Member, error) {
	local, domain, ok := strings.Cut(strings.ToLower(addr), "@")
	if !ok || h.opts.MailDomain == "" || domain != strings.ToLower(h.opts.MailDomain) {
		return nil, storage.ErrNotFound
	}
	local, _, _ = strings.Cut(local, "+") // id+tag@domain: sub-addressing (RFC 5233)
	m, err := apitokens.Of(h.store).InboundMemberByID(ctx, local)
	if errors.Is(err, storage.ErrNotFound) {
		// An address made before ids were indexed: index them once.
		h.indexInbound.Do(func() {
			if err := apitokens.Of(h.store).IndexInboundIDs(ctx); err != nil {
				h.log.Error("index newsletter addresses", zap.Error(err))
			}
		})
		m, err = apitokens.Of(h.store).InboundMemberByID(ctx, local)
	}
	return m, err
}

// jsonAt follows path (object keys, or array indexes as ints) in v.
func jsonAt(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// firstString is the first of the paths whose value is a non-empty string
// (JavaScript's a || b || c over Inboxt's payload paths).
func firstString(v any, paths ...[]any) string {
	for _, p := range paths {
		if s, ok := jsonAt(v, p...).(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

func jp(p ...any) []any { return p }

// webhookRecipient is Inboxt's extractRecipient (newsletter.service.ts),
// reduced to the bare address.
func webhookRecipient(msg map[string]any) string {
	r := firstString(msg,
		jp("recipient"), jp("rcpt_to"), jp("Recipient"), jp("OriginalRecipient"),
		jp("Recipients", 0), jp("items", 0, "Recipients", 0),
		jp("msys", "relay_message", "rcpt_to"),
		jp("ToFull", 0, "Email"),
		jp("recipients", 0), jp("headers", "To", 0), jp("To"))
	if r == "" {
		return ""
	}
	if a, err := mail.ParseAddress(r); err == nil {
		return a.Address
	}
	if l, err := mail.ParseAddressList(r); err == nil && len(l) > 0 {
		return l[0].Address
	}
	return strings.TrimSpace(r)
}

// webhookNewsletter reads one message as Inboxt's extractSubject,
// extractMessageId, extractHtml, extractText and extractAuthor do
// (newsletter.service.ts, Inboxt/inboxt@45f4314).
func webhookNewsletter(msg map[string]any) (*newsletter, error) {
	subject := firstString(msg, jp("subject"), jp("Subject"), jp("items", 0, "Subject"),
		jp("msys", "relay_message", "content", "subject"), jp("headers", "Subject", 0))
	id := firstString(msg, jp("messageId"), jp("message_id"), jp("MessageID"), jp("MessageId"),
		jp("items", 0, "MessageId"), jp("msys", "relay_message", "content", "Message-ID"),
		jp("headers", "Message-ID", 0), jp("eventId"), jp("_id"))
	htmlBody := firstString(msg, jp("html"), jp("HtmlBody"), jp("RawHtmlBody"), jp("html_body"),
		jp("Html-part"), jp("items", 0, "RawHtmlBody"), jp("msys", "relay_message", "content", "html"),
		jp("body", "stripped_html"), jp("body", "html"))
	text := firstString(msg, jp("text"), jp("TextBody"), jp("RawTextBody"), jp("plain_body"),
		jp("Text-part"), jp("items", 0, "RawTextBody"), jp("msys", "relay_message", "content", "text"),
		jp("body", "stripped_plaintext"), jp("body", "plaintext"))
	from := firstString(msg, jp("from"), jp("FromName"), jp("FromFull", "Name"), jp("FromFull", "Email"),
		jp("Sender"), jp("msg_from"), jp("items", 0, "From", "Name"), jp("items", 0, "From", "Address"),
		jp("msys", "relay_message", "friendly_from"), jp("msys", "relay_message", "msg_from"),
		jp("headers", "From", 0), jp("From"), jp("From", "Name"), jp("From", "Address"), jp("envelope_sender"))
	// (A Brevo message, one of its items, has From: {Name, Address}.)
	fromAddr := firstString(msg, jp("FromFull", "Email"), jp("items", 0, "From", "Address"), jp("From", "Address"),
		jp("msys", "relay_message", "msg_from"), jp("envelope_sender"))
	nl := &newsletter{}
	from = articles.OneLine(from)
	if _, err := mail.ParseAddress(from); err != nil {
		from = strings.Trim(from, `"`) // Inboxt's
	}
	if a, err := mail.ParseAddress(from); err == nil {
		nl.fromName, nl.fromAddress = articles.OneLine(a.Name), strings.ToLower(a.Address)
	} else if strings.Contains(from, "@") && !strings.Contains(from, " ") {
		nl.fromAddress = strings.ToLower(from)
	} else {
		nl.fromName = from
	}
	if nl.fromAddress == "" && fromAddr != "" {
		if a, err := mail.ParseAddress(fromAddr); err == nil {
			nl.fromAddress = strings.ToLower(a.Address)
		}
	}
	if at := strings.LastIndexByte(nl.fromAddress, '@'); at >= 0 {
		nl.domain = strings.TrimPrefix(nl.fromAddress[at+1:], "www.")
	}
	if nl.fromName == "" {
		nl.fromName = nl.fromAddress
	}
	if nl.fromName == "" {
		nl.fromName = "Unknown sender" // Inboxt's
	}
	nl.fromName = articles.Clip(nl.fromName, library.MaxAuthorLen)
	nl.subject = articles.Clip(articles.OneLine(subject), library.MaxTitleLen)
	hdr := mail.Header{"Message-Id": {id}}
	var err error
	if nl.messageID, err = messageID(hdr); err != nil {
		return nil, err
	}
	nl.html, nl.text = htmlBody, text
	if err := finishNewsletter(nl); err != nil {
		return nil, err
	}
	return nl, nil
}
