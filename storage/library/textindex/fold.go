package textindex

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// Case folding: each character is mapped to one canonical character of its
// Unicode simple case folding orbit (FoldRune), so "Σ", "σ" and "ς", or
// "K", "k" and the Kelvin sign, are the same; no multi-character folds
// ("ß" is not "ss") and no removal of diacritics ("é" is not "e").

// FoldRune maps r to the lower case of the smallest character of its
// simple case folding orbit: one character for every member of the orbit.
func FoldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

// AppendFold appends s case-folded to b. Invalid UTF-8 is kept as it is.
func AppendFold[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n == 1 {
			b = append(b, c)
			i++
			continue
		}
		b = utf8.AppendRune(b, FoldRune(r))
		i += n
	}
	return b
}

// Fold returns s case-folded as searches compare it.
func Fold(s string) string { return string(AppendFold(nil, s)) }

// Text is the folded text of a document: its fields (a title, a
// description, a body) one after the other, which trigrams do not span.
type Text struct {
	b     []byte
	ends  []int
	order uint64
}

// Reset empties t, keeping its buffers.
func (t *Text) Reset() { t.b, t.ends, t.order = t.b[:0], t.ends[:0], 0 }

// SetOrder sets the document's order value (Texts.Order), which the
// segment that indexes the text keeps the bounds of.
func (t *Text) SetOrder(v uint64) { t.order = v }

// AddField appends a field, folding s.
func (t *Text) AddField(s string) {
	t.b = AppendFold(t.b, s)
	t.ends = append(t.ends, len(t.b))
}

// AddFolded appends a field that add appends, already folded, to its
// argument.
func (t *Text) AddFolded(add func(b []byte) ([]byte, error)) error {
	b, err := add(t.b)
	t.b = b
	t.ends = append(t.ends, len(t.b))
	return err
}

// field is the i-th field.
func (t *Text) field(i int) []byte {
	start := 0
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.b[start:t.ends[i]]
}

// Contains reports whether a field holds the folded needle.
func (t *Text) Contains(needle []byte) bool {
	for i := range t.ends {
		if bytes.Contains(t.field(i), needle) {
			return true
		}
	}
	return false
}
