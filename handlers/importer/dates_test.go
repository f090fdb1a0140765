package importer

import (
	"testing"
	"time"
)

// Every date form an export writes is read, whichever layouts are skipped
// before time.Parse; forms that are none of them are not.
func TestDatesOfEveryLayoutAreRead(t *testing.T) {
	want := time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)
	for _, s := range []string{
		"2024-03-05T07:08:09Z",
		"2024-03-05T09:08:09+02:00",
		"2024-03-05T09:08:09+0200",
		"2024-03-05T07:08:09Z",
		"2024-03-05 09:08:09+02:00",
		"2024-03-05 09:08:09 +0200",
		"2024-03-05T07:08:09",
		"2024-03-05 07:08:09",
		"2024-03-05  07:08:09",
		"Tue, 05 Mar 2024 09:08:09 +0200",
		"Tue, 05 Mar 2024 07:08:09 UTC",
		" 1709622489 ",
	} {
		if got, ok := parseDate(s); !ok || !got.Equal(want) {
			t.Errorf("parseDate(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if got, ok := parseDate("2024-03-05"); !ok || !got.Equal(time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("parseDate(a plain date) = %v, %v", got, ok)
	}
	for _, s := range []string{"", "+1709622489", "01709622489", "0x65e6c4d9", "1_709_622_489", "-5", "0",
		"2024-03-05x07:08:09", "2024-3-5", "05/03/2024", "Tue 05 Mar 2024 07:08:09 UTC"} {
		if got, ok := parseDate(s); ok {
			t.Errorf("parseDate(%q) = %v, want none", s, got)
		}
	}
}
