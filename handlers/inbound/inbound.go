package inbound

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/charmap"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// acceptNewsletterPost answers a request to a newsletter endpoint (the
// inbound URL, the mail webhook) that is not a POST (405, with how to send
// instead) or is over the per-address limit (429), and reports whether to
// go on.
func (h *Handler) acceptNewsletterPost(w http.ResponseWriter, r *http.Request, how string) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		inboxtapi.WriteError(w, http.StatusMethodNotAllowed, inboxtapi.CodeMethodNotAllowed, how)
		return false
	}
	if h.limit != nil {
		if res := h.limit.Allow(r.Context(), ratelimit.AddressKey(h.opts.ClientIP(r))); !res.Allowed {
			w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(res.RetryAfter)))
			metrics.RateLimited(metrics.LimitNewsletter)
			inboxtapi.WriteError(w, http.StatusTooManyRequests, inboxtapi.CodeRateLimited, "too many messages; retry later")
			return false
		}
	}
	return true
}

// readNewsletterBody reads the body of a newsletter endpoint up to
// MaxInboundBytes; past it, or unreadable, it answers 413 or 400 naming what
// (the message, the request) and reports false.
func (h *Handler) readNewsletterBody(w http.ResponseWriter, r *http.Request, what string) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			inboxtapi.WriteError(w, http.StatusRequestEntityTooLarge, inboxtapi.CodeBadRequest, fmt.Sprintf("the %s must be at most %d bytes", what, h.opts.MaxBytes))
			return nil, false
		}
		inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, "the "+what+" could not be read")
		return nil, false
	}
	return b, true
}

// storeFailed answers a store error while doing what: the store's refusal
// for now (inboxtapi.Refusal: a status the mail provider retries on), else
// 500, logged.
func (h *Handler) storeFailed(w http.ResponseWriter, err error, what string) {
	if status, code, ok := inboxtapi.Refusal(w, err); ok {
		inboxtapi.WriteError(w, status, code, err.Error())
		return
	}
	h.log.Error(what, zap.Error(err))
	inboxtapi.WriteError(w, http.StatusInternalServerError, inboxtapi.CodeInternal, "internal error; it was logged")
}

// serveInbound takes a raw RFC 5322 message POSTed to a member's secret
// inbound URL (what email-forwarding services send) and saves it as a
// NEWSLETTER item. A message with a Message-ID the member already has is
// answered as the first delivery was (201, that item's id) and not saved
// again. A malformed message gets 400 and nothing is stored.
func (h *Handler) serveInbound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !h.acceptNewsletterPost(w, r, "POST the raw message (RFC 5322) to this URL") {
		return
	}
	secret := strings.TrimPrefix(r.URL.Path, Path)
	m, err := apitokens.Of(h.store).InboundMember(r.Context(), secret)
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, members.ErrSuspended) {
			h.storeFailed(w, err, "look up inbound secret")
			return
		}
		// The same answer for unknown and suspended, so the URL reveals nothing.
		inboxtapi.WriteError(w, http.StatusNotFound, inboxtapi.CodeNotFound, "unknown inbound address")
		return
	}
	raw, ok := h.readNewsletterBody(w, r, "message")
	if !ok {
		return
	}
	nl, err := parseNewsletter(raw)
	if err != nil {
		inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, "malformed message: "+err.Error())
		return
	}
	it, created, err := h.articles.SaveContent(r.Context(), m.ID, nl.item())
	if err != nil {
		if storage.IsInvalid(err) {
			inboxtapi.WriteError(w, http.StatusBadRequest, inboxtapi.CodeBadRequest, "malformed message: "+err.Error())
			return
		}
		h.storeFailed(w, err, "save newsletter")
		return
	}
	if created {
		h.log.Info("newsletter received", zap.String("member", m.Username), zap.String("item", it.ID))
	} else {
		// A retry of a delivery that was saved: the same answer, so the
		// forwarding service stops retrying.
		h.log.Info("newsletter received again", zap.String("member", m.Username), zap.String("item", it.ID))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": it.ID})
}

// newsletter is what is kept of an inbound message.
type newsletter struct {
	subject, fromName, fromAddress, domain string
	description, html, text                string
	messageID                              string // normalised; "" when absent
	parts                                  int    // MIME parts walked, at most maxMIMEParts
}

const maxMIMEDepth = 10

// maxMIMEParts bounds the parts of a message's tree (Go's own multipart
// form reader stops at 1000 too): each costs the reader its headers, so a
// message of many empty parts cost twenty times its size in allocations.
const maxMIMEParts = 1000

// item is the newsletter as the saved item both newsletter endpoints store.
func (nl *newsletter) item() library.NewItem {
	return library.NewItem{
		Type:         library.TypeNewsletter,
		Title:        nl.subject,
		Description:  nl.description,
		Author:       nl.fromName,
		SourceDomain: nl.domain,
		WordCount:    len(strings.Fields(nl.text)),
		HTML:         nl.html,
		Text:         nl.text,
		FromName:     nl.fromName,
		FromAddress:  nl.fromAddress,
		MessageID:    nl.messageID,
	}
}

// parseNewsletter reads a raw RFC 5322 message: the subject (RFC 2047
// decoded), the sender, and the first HTML and plain-text parts of the
// body (multipart trees walked, transfer encodings and charsets decoded),
// the HTML sanitised. Its errors say what is wrong, for the 400 answer.
func parseNewsletter(raw []byte) (*newsletter, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, errors.New("the headers could not be parsed")
	}
	from, err := msg.Header.AddressList("From")
	if err != nil || len(from) == 0 {
		return nil, errors.New("the From header is missing or invalid")
	}
	nl := &newsletter{fromName: articles.OneLine(from[0].Name), fromAddress: strings.ToLower(from[0].Address)}
	if at := strings.LastIndexByte(nl.fromAddress, '@'); at >= 0 {
		nl.domain = strings.TrimPrefix(nl.fromAddress[at+1:], "www.")
	}
	dec := new(mime.WordDecoder)
	dec.CharsetReader = charset.NewReaderLabel
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		subject = msg.Header.Get("Subject")
	}
	nl.subject = articles.Clip(articles.OneLine(subject), library.MaxTitleLen)
	if nl.fromName == "" {
		nl.fromName = nl.fromAddress
	}
	nl.fromName = articles.Clip(nl.fromName, library.MaxAuthorLen)
	if nl.messageID, err = messageID(msg.Header); err != nil {
		return nil, err
	}
	header := textproto.MIMEHeader(msg.Header)
	if err := walkPart(header, msg.Body, nl, 0); err != nil {
		return nil, err
	}
	if err := finishNewsletter(nl); err != nil {
		return nil, err
	}
	return nl, nil
}

// finishNewsletter sanitises the HTML body, makes the missing one of HTML
// and text from the other, and sets the description.
func finishNewsletter(nl *newsletter) error {
	nl.html = strings.TrimSpace(articles.SanitizeHTML(nl.html))
	switch {
	case nl.html == "" && strings.TrimSpace(nl.text) == "":
		return errors.New("the message has no text or HTML body")
	case nl.html == "":
		nl.html = textToHTML(nl.text)
	case nl.text == "":
		nl.text = articles.HTMLText(nl.html)
	}
	nl.text = strings.TrimSpace(nl.text)
	nl.description = articles.Clip(articles.OneLine(nl.text), 300)
	return nil
}

// messageID is the message's Message-ID header in the form used to
// recognise a message delivered twice: without the angle brackets and
// white space, the part after "@" (a domain) in lower case. It is "" when
// the header is absent or empty.
func messageID(h mail.Header) (string, error) {
	v := strings.TrimSpace(h.Get("Message-Id"))
	v = strings.TrimSuffix(strings.TrimPrefix(v, "<"), ">")
	v = strings.Join(strings.Fields(v), "")
	if len(v) > library.MaxMessageIDLen {
		return "", errors.New("the Message-ID header is too long")
	}
	if at := strings.LastIndexByte(v, '@'); at >= 0 {
		v = v[:at+1] + strings.ToLower(v[at+1:])
	}
	return v, nil
}

// walkPart fills nl from one MIME part, recursing into multiparts.
func walkPart(h textproto.MIMEHeader, body io.Reader, nl *newsletter, depth int) error {
	if depth > maxMIMEDepth {
		return errors.New("the MIME structure is nested too deeply")
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain; charset=us-ascii"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return errors.New("a Content-Type header is invalid")
	}
	if strings.HasPrefix(mt, "multipart/") {
		boundary := params["boundary"]
		if boundary == "" {
			return errors.New("a multipart body has no boundary")
		}
		mr := multipart.NewReader(body, boundary)
		parts := 0
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return errors.New("a multipart body is truncated or malformed")
			}
			parts++
			if nl.parts++; nl.parts > maxMIMEParts {
				return fmt.Errorf("the message has more than %d MIME parts", maxMIMEParts)
			}
			if err := walkPart(p.Header, p, nl, depth+1); err != nil {
				return err
			}
		}
		if parts == 0 {
			return errors.New("a multipart body has no parts")
		}
		return nil
	}
	if disp, _, _ := mime.ParseMediaType(h.Get("Content-Disposition")); disp == "attachment" {
		return nil
	}
	if mt != "text/html" && mt != "text/plain" {
		return nil
	}
	if mt == "text/html" && nl.html != "" || mt == "text/plain" && nl.text != "" {
		return nil
	}
	var r io.Reader = body
	switch strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return errors.New("a body part could not be decoded")
	}
	text, err := decodeCharset(b, mt, params["charset"])
	if err != nil {
		return errors.New("a body part could not be decoded")
	}
	if mt == "text/html" {
		nl.html = text
	} else {
		nl.text = text
	}
	return nil
}

// decodeCharset turns a text part into UTF-8: by its MIME charset when it
// has one; an HTML part without one by its byte order mark or <meta>
// charset; bytes that are still not UTF-8 (no charset, an unknown or a
// wrong one) as windows-1252, which Latin-1 text also decodes as.
func decodeCharset(b []byte, mt, cs string) (string, error) {
	if cs != "" {
		if enc, _ := charset.Lookup(cs); enc != nil {
			if out, err := enc.NewDecoder().Bytes(b); err == nil && utf8.Valid(out) {
				return string(out), nil
			}
		}
	} else if mt == "text/html" {
		if enc, _, _ := charset.DetermineEncoding(b, "text/html"); enc != nil {
			if out, err := enc.NewDecoder().Bytes(b); err == nil && utf8.Valid(out) {
				return string(out), nil
			}
		}
	}
	if utf8.Valid(b) {
		return string(b), nil
	}
	out, err := charmap.Windows1252.NewDecoder().Bytes(b)
	return string(out), err
}

// textToHTML shows a plain-text newsletter as paragraphs.
func textToHTML(text string) string {
	var b strings.Builder
	for _, para := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if para = strings.TrimSpace(para); para != "" {
			b.WriteString("<p>")
			b.WriteString(strings.ReplaceAll(html.EscapeString(para), "\n", "<br>"))
			b.WriteString("</p>\n")
		}
	}
	return b.String()
}
