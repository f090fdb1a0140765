package library

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Label is a member's tag for saved items.
type Label struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Color     string    `json:"color"`
	Order     float64   `json:"order"`
	CreatedAt time.Time `json:"created_at"`
}

// SavedQuery is a named search (a `q` string) kept by a member.
type SavedQuery struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Query     string    `json:"query"`
	Order     float64   `json:"order"`
	CreatedAt time.Time `json:"created_at"`
}

// Limits on labels and saved queries.
const (
	MaxLabelNameLen  = 50
	MaxLabels        = 500
	MaxQueryNameLen  = 100
	MaxSavedQueryLen = 500
	MaxSavedQueries  = 100
)

var colorRE = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)

func labelKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "label", id) }
func labelNameKey(memberID, name string) []byte {
	return storage.Key("u", memberID, "gql", "labelname", labelNameFold(name))
}

// legacyLabelNameKey is the name key of a label written before names were
// folded (by strings.ToLower); a rename or deletion drops it.
func legacyLabelNameKey(memberID, name string) []byte {
	return storage.Key("u", memberID, "gql", "labelname", strings.ToLower(name))
}

// labelNameFold is the form in which two label names are the same name:
// Unicode's canonical caseless match (NFD, full case folding), kept in NFC.
// "σ", "ς" and "Σ" are one name, and so are "café" in NFC and in NFD. The
// name key, the uniqueness check and label: searches all use it.
func labelNameFold(name string) string {
	return norm.NFC.String(cases.Fold().String(norm.NFD.String(name)))
}
func savedQueryKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "sq", id) }

// LabelNameCanBe reports whether some label could be named name as a
// client spells it (a feed's or a page's ?label=): UTF-8 of at most
// MaxLabelNameLen characters once in NFC, as names are kept, so a name
// spelled decomposed (NFD) counts as its label's. Longer spellings are
// refused before normalising: a canonical decomposition is at most four
// characters long.
func LabelNameCanBe(name string) bool {
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 4*MaxLabelNameLen {
		return false
	}
	return utf8.RuneCountInString(norm.NFC.String(name)) <= MaxLabelNameLen
}

func validateLabel(name, color string) (string, string, error) {
	name = strings.TrimSpace(name)
	if utf8.ValidString(name) {
		name = norm.NFC.String(name)
	}
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxLabelNameLen || strings.ContainsAny(name, "\x00\r\n") {
		return "", "", storage.InvalidField("name", "label name must be 1 to %d characters on one line", MaxLabelNameLen)
	}
	if !colorRE.MatchString(color) {
		return "", "", storage.InvalidField("color", "label color must be a hex color such as #ff8800")
	}
	return name, strings.ToLower(color), nil
}

func labels(tx *storage.Tx, memberID string) ([]*Label, error) {
	return listInOrder(tx, storage.Key("u", memberID, "gql", "label", ""), func(l *Label) (float64, string) { return l.Order, l.ID })
}

// listInOrder reads the JSON records under prefix, ordered by their order
// then their id (key).
func listInOrder[T any](tx *storage.Tx, prefix []byte, key func(*T) (float64, string)) ([]*T, error) {
	var out []*T
	err := tx.Scan(prefix, nil, false, false, func(_, v []byte) (bool, error) {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		out = append(out, &r)
		return true, nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		oi, idi := key(out[i])
		oj, idj := key(out[j])
		if oi != oj {
			return oi < oj
		}
		return idi < idj
	})
	return out, err
}

// memberLabelIDs returns those of ids that are labels of the member.
func memberLabelIDs(tx *storage.Tx, memberID string, ids []string) ([]string, error) {
	var out []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		ok, err := tx.Has(labelKey(memberID, id))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// labelNameTaken reports whether another label of the member than self has
// name, by its name key. Labels written before names were folded have their
// key in the legacy form, which may differ: those are compared by name.
func labelNameTaken(tx *storage.Tx, memberID, name, self string) (bool, error) {
	id, err := tx.Get(labelNameKey(memberID, name))
	if err == nil && string(id) != self {
		return true, nil
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	all, err := labels(tx, memberID)
	if err != nil {
		return false, err
	}
	fold := labelNameFold(name)
	for _, l := range all {
		if l.ID != self && labelNameFold(l.Name) == fold {
			return true, nil
		}
	}
	return false, nil
}

// deleteLabelNameKeys drops the name keys of label id's name, in both forms,
// that point to it (two labels written before names were folded can share
// the folded key; the other one keeps it).
func deleteLabelNameKeys(tx *storage.Tx, memberID, name, id string) error {
	for _, k := range [][]byte{labelNameKey(memberID, name), legacyLabelNameKey(memberID, name)} {
		owner, err := tx.Get(k)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if string(owner) == id {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Labels lists the member's labels in their order.
func (s Store) Labels(ctx context.Context, memberID string) ([]*Label, error) {
	l, err := s.lists(ctx, memberID)
	if err != nil {
		return nil, err
	}
	return copies(l.labels), nil
}

// LabelsByID returns the member's labels with ids, in that order.
func (s Store) LabelsByID(ctx context.Context, memberID string, ids []string) ([]*Label, error) {
	var out []*Label
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		for _, id := range ids {
			var l Label
			err := tx.GetJSON(labelKey(memberID, id), &l)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, &l)
		}
		return nil
	})
	return out, err
}

// CreateLabel adds a label; names are unique per member, ignoring case and
// Unicode normalisation (see labelNameFold), and stored in NFC.
func (s Store) CreateLabel(ctx context.Context, memberID, name, color string) (*Label, error) {
	name, color, err := validateLabel(name, color)
	if err != nil {
		return nil, err
	}
	var out *Label
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		l, err := createLabel(tx, memberID, name, color)
		out = l
		return err
	})
	return out, err
}

// createLabel adds a label whose name and color validateLabel accepted.
func createLabel(tx *storage.Tx, memberID, name, color string) (*Label, error) {
	if err := tx.GuardCount(memberID, "label"); err != nil {
		return nil, err
	}
	taken, err := labelNameTaken(tx, memberID, name, "")
	if err != nil {
		return nil, err
	}
	if taken {
		return nil, storage.ErrConflict
	}
	all, err := labels(tx, memberID)
	if err != nil {
		return nil, err
	}
	if len(all) >= MaxLabels {
		return nil, storage.Invalid("at most %d labels", MaxLabels)
	}
	order := 0.0
	if len(all) > 0 {
		order = all[len(all)-1].Order + 1
	}
	id, err := tx.FreshID(func(id string) []byte { return labelKey(memberID, id) })
	if err != nil {
		return nil, err
	}
	l := &Label{ID: id, Name: name, Color: color, Order: order, CreatedAt: storage.Now()}
	if err := tx.Put(labelNameKey(memberID, name), []byte(l.ID), 0); err != nil {
		return nil, err
	}
	if err := listsChanged(tx, memberID); err != nil {
		return nil, err
	}
	return l, tx.PutJSON(labelKey(memberID, l.ID), l, 0)
}

func labelItems(tx *storage.Tx, memberID, labelID string) ([]string, error) {
	return tx.Suffixes(storage.Key("u", memberID, "gql", "li", labelID, ""))
}

// UpdateLabel renames or recolors a label. Items carrying it get a new
// updatedAt, so incremental sync sees the new name.
func (s Store) UpdateLabel(ctx context.Context, memberID, id, name, color string) (*Label, error) {
	name, color, err := validateLabel(name, color)
	if err != nil {
		return nil, err
	}
	var out *Label
	touch := func(tx *storage.Tx, ids []string) error { return touchItems(tx, memberID, ids, nil) }
	err = s.changeLabel(ctx, func(tx *storage.Tx) ([]string, error) {
		var l Label
		if err := tx.GetJSON(labelKey(memberID, id), &l); err != nil {
			return nil, err
		}
		// Keeping its own name (as Inboxt's updateLabel sends it) is never a
		// conflict, also for a pair of labels an earlier version let share
		// a folded name.
		if labelNameFold(l.Name) != labelNameFold(name) {
			taken, err := labelNameTaken(tx, memberID, name, id)
			if err != nil {
				return nil, err
			}
			if taken {
				return nil, storage.ErrConflict
			}
		}
		if err := deleteLabelNameKeys(tx, memberID, l.Name, l.ID); err != nil {
			return nil, err
		}
		switch owner, err := tx.Get(labelNameKey(memberID, name)); {
		case errors.Is(err, storage.ErrNotFound) || err == nil && string(owner) == l.ID:
			if err := tx.Put(labelNameKey(memberID, name), []byte(l.ID), 0); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		}
		changed := l.Name != name || l.Color != color
		l.Name, l.Color = name, color
		out = &l
		if err := listsChanged(tx, memberID); err != nil {
			return nil, err
		}
		if err := tx.PutJSON(labelKey(memberID, id), &l, 0); err != nil || !changed {
			return nil, err
		}
		return labelItems(tx, memberID, id)
	}, touch)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// labelBatch is how many items a label change updates in one transaction.
// A label on more items (thousands can carry one), or on items too big to
// change together with it, is changed in several transactions: the label
// itself first, then its items, a batch at a time. If the process stops in
// between, some items keep the old updatedAt, or the id of a deleted label,
// which reads skip (a label that no longer exists is not shown and cannot
// be searched for).
const labelBatch = 500

// changeLabel commits change, which changes a label and returns the ids of
// the items that need each, and each for those items: in the same
// transaction when they are at most labelBatch and fit in it, else after
// it, in batches.
func (s Store) changeLabel(ctx context.Context, change func(tx *storage.Tx) ([]string, error), each func(tx *storage.Tx, ids []string) error) error {
	var later []string
	commit := func(together bool) error {
		return s.st.Update(ctx, func(tx *storage.Tx) error {
			later = nil
			items, err := change(tx)
			if err != nil {
				return err
			}
			if together && len(items) <= labelBatch {
				return each(tx, items)
			}
			later = items
			return nil
		})
	}
	err := commit(true)
	if errors.Is(err, kv.ErrTooBig) {
		err = commit(false)
	}
	if err != nil {
		return err
	}
	return s.inBatches(ctx, later, each)
}

// inBatches calls fn with ids, labelBatch at a time, one transaction each
// (or more, see UpdateInParts).
func (s Store) inBatches(ctx context.Context, ids []string, fn func(tx *storage.Tx, ids []string) error) error {
	for len(ids) > 0 {
		n := min(len(ids), labelBatch)
		if err := s.st.UpdateInParts(ctx, ids[:n], nil, fn); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// DeleteLabel removes a label from the member and from its items (see
// labelBatch for a label on many items).
func (s Store) DeleteLabel(ctx context.Context, memberID, id string) error {
	unlabel := func(tx *storage.Tx, items []string) error { return unlabelItems(tx, memberID, id, items) }
	return s.changeLabel(ctx, func(tx *storage.Tx) ([]string, error) {
		var l Label
		if err := tx.GetJSON(labelKey(memberID, id), &l); err != nil {
			return nil, err
		}
		if err := deleteLabelNameKeys(tx, memberID, l.Name, l.ID); err != nil {
			return nil, err
		}
		if err := listsChanged(tx, memberID); err != nil {
			return nil, err
		}
		if err := tx.Delete(labelKey(memberID, id)); err != nil {
			return nil, err
		}
		return labelItems(tx, memberID, id)
	}, unlabel)
}

// DeleteUnusedLabel deletes the member's label id if no item carries it,
// in one transaction, and reports whether it did: a request that made a
// label and was then refused takes its label back this way, which leaves
// it to any other request that found it by name and used it meanwhile.
func (s Store) DeleteUnusedLabel(ctx context.Context, memberID, id string) (bool, error) {
	deleted := false
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		deleted = false
		var l Label
		if err := tx.GetJSON(labelKey(memberID, id), &l); err != nil {
			return err
		}
		if items, err := labelItems(tx, memberID, id); err != nil || len(items) > 0 {
			return err
		}
		if err := deleteLabelNameKeys(tx, memberID, l.Name, l.ID); err != nil {
			return err
		}
		if err := listsChanged(tx, memberID); err != nil {
			return err
		}
		deleted = true
		return tx.Delete(labelKey(memberID, id))
	})
	return deleted, err
}

// ReorderLabels puts the labels with ids first, in that order; the others
// follow in their previous order.
func (s Store) ReorderLabels(ctx context.Context, memberID string, ids []string) ([]*Label, error) {
	return reorderStored(ctx, s.st, memberID, ids, func(tx *storage.Tx) ([]*Label, error) { return labels(tx, memberID) },
		func(l *Label) string { return l.ID }, func(l *Label, order float64) []byte { l.Order = order; return labelKey(memberID, l.ID) })
}

// reorderStored reorders the records list reads (see reorder) and writes
// each with its new order (set, which returns its key): the member's
// labels or saved queries.
func reorderStored[T any](ctx context.Context, st *storage.Store, memberID string, ids []string, list func(tx *storage.Tx) ([]T, error),
	id func(T) string, set func(v T, order float64) []byte) ([]T, error) {
	var out []T
	err := st.Update(ctx, func(tx *storage.Tx) error {
		all, err := list(tx)
		if err != nil {
			return err
		}
		if out, err = reorder(all, ids, id); err != nil {
			return err
		}
		if err := listsChanged(tx, memberID); err != nil {
			return err
		}
		for i, v := range out {
			if err := tx.PutJSON(set(v, float64(i)), v, 0); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// reorder returns all with the elements named by ids first, in that order,
// then the others in their previous order. An unknown id is storage.ErrNotFound;
// repeated ids count once.
func reorder[T any](all []T, ids []string, id func(T) string) ([]T, error) {
	byID := make(map[string]T, len(all))
	for _, x := range all {
		byID[id(x)] = x
	}
	ordered := make([]T, 0, len(all))
	seen := map[string]bool{}
	for _, i := range ids {
		x, ok := byID[i]
		if !ok {
			return nil, storage.ErrNotFound
		}
		if !seen[i] {
			seen[i] = true
			ordered = append(ordered, x)
		}
	}
	for _, x := range all {
		if !seen[id(x)] {
			ordered = append(ordered, x)
		}
	}
	return ordered, nil
}

// --- saved queries ---

func validateSavedQuery(name, query string) (string, string, error) {
	name, err := storage.CleanLine(name, MaxQueryNameLen, "name")
	if err != nil {
		return "", "", err
	}
	if name == "" {
		return "", "", storage.InvalidField("name", "name must not be empty")
	}
	query, err = storage.CleanLine(query, MaxSavedQueryLen, "query")
	if err != nil {
		return "", "", err
	}
	return name, query, nil
}

func savedQueries(tx *storage.Tx, memberID string) ([]*SavedQuery, error) {
	return listInOrder(tx, storage.Key("u", memberID, "gql", "sq", ""), func(q *SavedQuery) (float64, string) { return q.Order, q.ID })
}

// SavedQueries lists the member's saved queries in their order.
func (s Store) SavedQueries(ctx context.Context, memberID string) ([]*SavedQuery, error) {
	l, err := s.lists(ctx, memberID)
	if err != nil {
		return nil, err
	}
	return copies(l.queries), nil
}

// CreateSavedQuery adds a saved query at the end.
func (s Store) CreateSavedQuery(ctx context.Context, memberID, name, query string) (*SavedQuery, error) {
	name, query, err := validateSavedQuery(name, query)
	if err != nil {
		return nil, err
	}
	var out *SavedQuery
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := tx.GuardCount(memberID, "sq"); err != nil {
			return err
		}
		all, err := savedQueries(tx, memberID)
		if err != nil {
			return err
		}
		if len(all) >= MaxSavedQueries {
			return storage.Invalid("at most %d saved queries", MaxSavedQueries)
		}
		order := 0.0
		if len(all) > 0 {
			order = all[len(all)-1].Order + 1
		}
		id, err := tx.FreshID(func(id string) []byte { return savedQueryKey(memberID, id) })
		if err != nil {
			return err
		}
		out = &SavedQuery{ID: id, Name: name, Query: query, Order: order, CreatedAt: storage.Now()}
		if err := listsChanged(tx, memberID); err != nil {
			return err
		}
		return tx.PutJSON(savedQueryKey(memberID, out.ID), out, 0)
	})
	return out, err
}

// UpdateSavedQuery renames a saved query or changes its query.
func (s Store) UpdateSavedQuery(ctx context.Context, memberID, id, name, query string) (*SavedQuery, error) {
	name, query, err := validateSavedQuery(name, query)
	if err != nil {
		return nil, err
	}
	var out SavedQuery
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(savedQueryKey(memberID, id), &out); err != nil {
			return err
		}
		out.Name, out.Query = name, query
		if err := listsChanged(tx, memberID); err != nil {
			return err
		}
		return tx.PutJSON(savedQueryKey(memberID, id), &out, 0)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSavedQuery removes a saved query.
func (s Store) DeleteSavedQuery(ctx context.Context, memberID, id string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		if ok, err := tx.Has(savedQueryKey(memberID, id)); err != nil || !ok {
			if err == nil {
				err = storage.ErrNotFound
			}
			return err
		}
		if err := listsChanged(tx, memberID); err != nil {
			return err
		}
		return tx.Delete(savedQueryKey(memberID, id))
	})
}

// ReorderSavedQueries puts the saved queries with ids first, in that order.
func (s Store) ReorderSavedQueries(ctx context.Context, memberID string, ids []string) ([]*SavedQuery, error) {
	return reorderStored(ctx, s.st, memberID, ids, func(tx *storage.Tx) ([]*SavedQuery, error) { return savedQueries(tx, memberID) },
		func(q *SavedQuery) string { return q.ID }, func(q *SavedQuery, order float64) []byte { q.Order = order; return savedQueryKey(memberID, q.ID) })
}
