package library

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// appendContentTextFolded appends the text of a content record (the JSON
// of ItemContent) to b, case-folded (textindex.AppendFold). It reads the form
// encoding/json writes ({"html":"…","text":"…"}) by passing over the HTML
// string and unescaping the text, several times faster than decoding the
// record (the HTML is most of it); a record of another form is decoded.
func appendContentTextFolded(b, rec []byte) ([]byte, error) {
	const head, mid = `{"html":"`, `","text":"`
	if bytes.HasPrefix(rec, []byte(head)) {
		if end := jsonStringEnd(rec, len(head)); end > 0 && bytes.HasPrefix(rec[end:], []byte(mid)) {
			start := end + len(mid)
			if tend := jsonStringEnd(rec, start); tend > 0 && string(rec[tend:]) == `"}` {
				if out, ok := appendUnescapedFold(b, rec[start:tend]); ok {
					return out, nil
				}
			}
		}
	}
	var c ItemContent
	if err := json.Unmarshal(rec, &c); err != nil {
		return b, err
	}
	return textindex.AppendFold(b, c.Text), nil
}

// jsonStringEnd is the index of the quote that closes the JSON string
// whose contents start at i, or -1.
func jsonStringEnd(b []byte, i int) int {
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		q := i + j
		n := 0 // backslashes before the quote
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// appendUnescapedFold appends the JSON string contents s unescaped and
// case-folded; false for an escape that is not JSON's.
func appendUnescapedFold(b, s []byte) ([]byte, bool) {
	return appendUnescaped(b, s, textindex.AppendFold, textindex.FoldRune)
}

// appendUnescaped appends the JSON string contents s unescaped, its plain
// runs through appendRun and its escaped characters through mapRune; false
// for an escape that is not JSON's.
func appendUnescaped(b, s []byte, appendRun func(b, s []byte) []byte, mapRune func(rune) rune) ([]byte, bool) {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return appendRun(b, s), true
		}
		b = appendRun(b, s[:i])
		s = s[i:]
		if len(s) < 2 {
			return b, false
		}
		var r rune
		switch s[1] {
		case '"', '\\', '/':
			r = rune(s[1])
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			u, ok := hex4(s[2:])
			if !ok {
				return b, false
			}
			r, s = rune(u), s[6:]
			if utf16.IsSurrogate(r) {
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if u2, ok := hex4(s[2:]); ok {
						if d := utf16.DecodeRune(r, rune(u2)); d != utf8.RuneError {
							r, s = d, s[6:]
						} else {
							r = utf8.RuneError
						}
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, mapRune(r))
			continue
		default:
			return b, false
		}
		b = utf8.AppendRune(b, mapRune(r))
		s = s[2:]
	}
	return b, true
}

func hex4(s []byte) (uint16, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var v uint16
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}
