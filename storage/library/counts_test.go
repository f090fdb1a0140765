package library

import (
	"fmt"
	"testing"
)

func TestStatusCountFollowsTheItems(t *testing.T) {
	st, m := openSavedTest(t)
	s := Of(st)
	var ids []string
	for i := range 5 {
		it, _, err := s.SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	waitIndexed(t, st, m.ID)
	if _, err := s.SetItemsStatus(t.Context(), m.ID, ids[:1], StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetItemsStatus(t.Context(), m.ID, ids[1:3], StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := s.PermanentlyDeleteItems(t.Context(), m.ID, ids[2:3]); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]int{StatusActive: 2, StatusArchived: 1, StatusDeleted: 1, StatusNotDeleted: 3, StatusAll: 4} {
		n, ok, err := s.StatusCount(t.Context(), m.ID, status)
		if err != nil || !ok || n != want {
			t.Errorf("StatusCount(%s) = %d, %v, %v; want %d", status, n, ok, err, want)
		}
	}
}

func TestTombstonesListDeletionsSince(t *testing.T) {
	st, m := openSavedTest(t)
	s := Of(st)
	it, _, err := s.SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/gone", Title: "Gone"})
	if err != nil {
		t.Fatal(err)
	}
	before := it.CreatedAt
	if err := s.PermanentlyDeleteItems(t.Context(), m.ID, []string{it.ID}); err == nil {
		t.Fatal("an item outside the trash was deleted for good")
	}
	if _, err := s.SetItemsStatus(t.Context(), m.ID, []string{it.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EmptyTrash(t.Context(), m.ID); err != nil {
		t.Fatal(err)
	}
	got, more, err := s.Tombstones(t.Context(), m.ID, before, 0, 10)
	if err != nil || more || len(got) != 1 || got[0].ID != it.ID || got[0].Title != "Gone" || got[0].URL != "https://example.com/gone" {
		t.Fatalf("Tombstones = %+v, %v, %v", got, more, err)
	}
	if got, _, _ := s.Tombstones(t.Context(), m.ID, got[0].DeletedAt.Add(1), 0, 10); len(got) != 0 {
		t.Errorf("a tombstone listed before its deletion time: %+v", got)
	}
}
