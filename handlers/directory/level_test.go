package directory

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestLevelZeroForANewAgent(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "newbie"))
	if en := e.mustEntry(a.pk); en.Level != 0 || en.Gates.PowOK || en.Gates.NIP05 != nil {
		t.Errorf("entry = %+v", en)
	}
}

func TestLevelOneByProofOfWork(t *testing.T) {
	e := newEnv(t, Options{PowMinBits: 10})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "miner", 10))
	en := e.mustEntry(a.pk)
	if en.Level != 1 || !en.Gates.PowOK || en.Gates.PowBits != 10 {
		t.Errorf("entry = %+v", en)
	}
}

func TestLevelOneByNIP05(t *testing.T) {
	e, a := envWithAgent(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true}, "named", nostr.Tag{"nip05", "named@agents.test"})
	en := e.mustEntry(a.pk)
	if en.Level != 1 || en.Gates.PowOK || en.Gates.NIP05 == nil || *en.Gates.NIP05 != "named@agents.test" {
		t.Errorf("entry = %+v", en)
	}
}

// Level 2 needs NIP-05, 7 days since registration and posts on 2 distinct
// UTC days; each missing condition keeps the agent at level 1.
func TestLevelTwoTransitions(t *testing.T) {
	e, a := envWithAgent(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true}, "steady", nostr.Tag{"nip05", "steady@agents.test"})

	e.postOnTwoDays(a, "first day", "second day")
	if en := e.mustEntry(a.pk); en.Level != 1 || en.ActiveDays != 2 {
		t.Fatalf("2 days after registration: level %d, active_days %d; want 1, 2", en.Level, en.ActiveDays)
	}

	// 7 days after registration, to the second.
	e.clock.Set(t0.Add(7 * 24 * time.Hour))
	if en := e.mustEntry(a.pk); en.Level != 2 {
		t.Fatalf("7 days after registration: level %d, want 2", en.Level)
	}

	// Level 3 is planned: never assigned, however long and active.
	for i := 0; i < 30; i++ {
		e.clock.Advance(24 * time.Hour)
		e.mustPost(note(t, a, e.now(), "still here, "+strings.Repeat("very ", i)+"busy"))
	}
	if en := e.mustEntry(a.pk); en.Level != 2 || en.ActiveDays != 32 {
		t.Errorf("after 30 more active days: level %d, active_days %d", en.Level, en.ActiveDays)
	}
}

func TestLevelTwoNeedsSevenDays(t *testing.T) {
	e, a := envWithAgent(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true}, "young", nostr.Tag{"nip05", "young@agents.test"})
	e.postOnTwoDays(a, "one", "two")
	e.clock.Set(t0.Add(7*24*time.Hour - time.Second))
	if en := e.mustEntry(a.pk); en.Level != 1 {
		t.Errorf("one second before 7 days: level %d, want 1", en.Level)
	}
}

func TestLevelTwoNeedsTwoDistinctUTCDays(t *testing.T) {
	e, a := envWithAgent(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true}, "oneday", nostr.Tag{"nip05", "oneday@agents.test"})
	// Two posts 11 hours apart, but on the same UTC day.
	e.clock.Set(time.Date(2026, 3, 11, 0, 30, 0, 0, time.UTC))
	e.mustPost(note(t, a, e.now(), "early"))
	e.clock.Set(time.Date(2026, 3, 11, 23, 30, 0, 0, time.UTC))
	e.mustPost(note(t, a, e.now(), "late"))
	e.clock.Set(t0.Add(8 * 24 * time.Hour))
	if en := e.mustEntry(a.pk); en.Level != 1 || en.ActiveDays != 1 {
		t.Errorf("posts on one UTC day: level %d, active_days %d; want 1, 1", en.Level, en.ActiveDays)
	}
}

func TestActiveDaysCountUTCDaysOfCreatedAt(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "night owl"))
	// 20 minutes apart, across UTC midnight: two days.
	e.clock.Set(time.Date(2026, 3, 12, 23, 50, 0, 0, time.UTC))
	e.mustPost(note(t, a, e.now(), "before midnight"))
	e.clock.Set(time.Date(2026, 3, 13, 0, 10, 0, 0, time.UTC))
	e.mustPost(note(t, a, e.now(), "after midnight"))
	if en := e.mustEntry(a.pk); en.ActiveDays != 2 {
		t.Errorf("active_days = %d, want 2", en.ActiveDays)
	}
}

func TestLevelTwoNeedsNIP05(t *testing.T) {
	e := newEnv(t, Options{PowMinBits: 8})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "pow only", 8))
	e.postOnTwoDays(a, "one", "two")
	e.clock.Advance(10 * 24 * time.Hour)
	if en := e.mustEntry(a.pk); en.Level != 1 {
		t.Errorf("proof of work, 11 days, 2 active days, no NIP-05: level %d, want 1", en.Level)
	}
}

func TestAnyFlagForcesLevelZero(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true, BurstMaxPosts: 3})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "flagged", 8, nostr.Tag{"nip05", "flagged@agents.test"}))
	e.postOnTwoDays(a, "day one", "day two")
	e.clock.Set(t0.Add(8 * 24 * time.Hour))
	if en := e.mustEntry(a.pk); en.Level != 2 {
		t.Fatalf("before the burst: level %d", en.Level)
	}
	for i := 0; i < 4; i++ {
		e.mustPost(note(t, a, e.now().Add(time.Duration(i)*time.Second), "spam "+string(rune('a'+i))))
	}
	en := e.mustEntry(a.pk)
	if en.Level != 0 || len(en.Flags) == 0 {
		t.Errorf("with a flag: level %d, flags %v; want 0 and a flag", en.Level, en.Flags)
	}
}
