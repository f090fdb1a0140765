package library

import (
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

func TestNormalizeURLDropsTrackingParameters(t *testing.T) {
	for in, want := range map[string]string{
		"https://Example.org/a?utm_source=news&id=3&fbclid=x#top":   "https://example.org/a?id=3",
		"https://example.org/a?UTM_Medium=email":                    "https://example.org/a",
		"https://example.org/a?gclid=1&msclkid=2&mc_cid=3&mc_eid=4": "https://example.org/a",
		"https://example.org/a?page=2&sort=new":                     "https://example.org/a?page=2&sort=new",
		"https://example.org/a?utm=kept&utmost=kept":                "https://example.org/a?utm=kept&utmost=kept",
		"https://example.org/watch?v=abc&utm_campaign=x&t=10":       "https://example.org/watch?v=abc&t=10",
		"https://example.org/a?utm%5Fsource=escaped&q=a%20b":        "https://example.org/a?q=a%20b",
	} {
		if got, err := NormalizeURL(in); err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The same article saved again with tracking parameters is the same item;
// a store written before (the item's key made from its URL with them) has
// its keys moved when it opens, so that holds for the items it has too.
func TestTrackingParametersDoNotMakeASecondItem(t *testing.T) {
	st, m := openSavedTest(t)
	first, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.org/bread", Title: "Bread", Text: "body"})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	again, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.org/bread?utm_source=newsletter&fbclid=abc", Title: "Bread", Text: "body"})
	if err != nil || created || again.ID != first.ID || again.OriginalURL != "https://example.org/bread" {
		t.Fatalf("saved again with tracking: %+v created=%v %v", again, created, err)
	}

	// An item as an earlier version left it: its URL with tracking
	// parameters, keyed by that URL's digest; the store not migrated yet.
	const tracked = "https://example.org/rolls?utm_source=feed&id=7"
	old, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.org/rolls?id=7", Title: "Rolls", Text: "body"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(t.Context(), func(tx *storage.Tx) error {
		var it SavedItem
		if err := getItem(tx, itemKey(m.ID, old.ID), &it); err != nil {
			return err
		}
		before := it
		it.OriginalURL = tracked
		if err := writeItem(tx, itemChange{old: &before, it: &it}); err != nil {
			return err
		}
		if err := tx.Delete(urlKey(m.ID, "https://example.org/rolls?id=7")); err != nil {
			return err
		}
		return tx.Put(legacyURLKey(m.ID, tracked), []byte(old.ID), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := migrateURLKeys(t.Context(), st)
	if err != nil || moved != 1 {
		t.Fatalf("migrate: moved %d, %v", moved, err)
	}
	if moved, err := migrateURLKeys(t.Context(), st); err != nil || moved != 0 {
		t.Fatalf("second migration: moved %d, %v", moved, err)
	}
	for _, u := range []string{"https://example.org/rolls?id=7", "https://example.org/rolls?id=7&utm_medium=email"} {
		it, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: u, Title: "Rolls", Text: "body"})
		if err != nil || created || it.ID != old.ID {
			t.Fatalf("%s after the migration: %+v created=%v %v", u, it, created, err)
		}
	}
	// The legacy key went with the move.
	err = st.View(t.Context(), func(tx *storage.Tx) error {
		if _, err := tx.Get(legacyURLKey(m.ID, tracked)); err == nil {
			t.Error("the legacy key is still there")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
