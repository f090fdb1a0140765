package library

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
)

// ItemHTML returns the saved HTML of an item (ItemContent's HTML), decoding
// the html field of the content record alone: the reader page shows the
// HTML, and decoding the whole record (the text as well, the record first
// checked as a whole) was a fifth of that page's time.
func (s Store) ItemHTML(ctx context.Context, memberID, id string) (string, error) {
	var html string
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		b, err := tx.Get(contentKey(memberID, id))
		if err != nil {
			return contentOrNone(tx, memberID, id, err)
		}
		html, err = htmlField(b)
		return err
	})
	return html, err
}

// htmlField is the "html" member of a content record ("" when it has
// none). A record as SaveItem writes it (json.Marshal of ItemContent)
// starts with that member: its string alone is unescaped (encoding/json
// would check the whole record, then scan the string twice); a record of
// another form is decoded whole.
func htmlField(b []byte) (string, error) {
	const head = `{"html":"`
	if bytes.HasPrefix(b, []byte(head)) {
		if end := jsonStringEnd(b, len(head)); end > 0 {
			body := b[len(head):end]
			if out, ok := appendUnescaped(make([]byte, 0, len(body)), body, appendBytes, sameRune); ok && utf8.Valid(out) {
				return string(out), nil
			}
		}
	}
	var c ItemContent
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("content record: %w", err)
	}
	return c.HTML, nil
}

func appendBytes(b, s []byte) []byte { return append(b, s...) }

func sameRune(r rune) rune { return r }
