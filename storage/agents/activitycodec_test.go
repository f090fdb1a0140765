package agents

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// An activity written in the binary form reads back as it was, through
// every reader of activities; one stored as JSON by an earlier version is
// still read, and the next post carries it on.
func TestActivityRecordsRoundTripAndOlderJSONIsRead(t *testing.T) {
	st := openTestStore(t)
	registerTestAgent(t, st, &Agent{Pubkey: agentPK1, Name: "a"})
	registerTestAgent(t, st, &Agent{Pubkey: agentPK2, Name: "b"})
	want := Activity{
		Days:       []int32{19000, 19001, 19005},
		Times:      []int64{1641600000, 1641600060, 1641686400, -5},
		Skels:      []Skeleton{{At: 1641600000, Hash: 1<<64 - 1}, {At: 1641600060, Hash: 0}, {At: 1641500000, Hash: 42}},
		BurstAt:    1641600060,
		LastPostAt: 1641686400,
		Posts:      1 << 40,
	}
	if _, err := st.RecordPosts(t.Context(), []Post{{ID: "p1", Pubkey: agentPK1}}, func(_ *Agent, act *Activity, _ Post) error {
		*act = *want.clone()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// As an earlier version wrote it.
	if err := st.st.Update(t.Context(), func(tx *storage.Tx) error {
		return tx.Put(agentActKey(agentPK2), []byte(`{"d":[19000],"t":[1641600000],"s":[{"t":1641600000,"h":7}],"l":1641600000,"n":3}`), 0)
	}); err != nil {
		t.Fatal(err)
	}
	older := Activity{Days: []int32{19000}, Times: []int64{1641600000}, Skels: []Skeleton{{At: 1641600000, Hash: 7}}, LastPostAt: 1641600000, Posts: 3}
	check := func(how string, got map[string]*Activity) {
		t.Helper()
		if !reflect.DeepEqual(got[agentPK1], &want) {
			t.Errorf("%s: %+v, want %+v", how, got[agentPK1], want)
		}
		if !reflect.DeepEqual(got[agentPK2], &older) {
			t.Errorf("%s, the JSON record: %+v, want %+v", how, got[agentPK2], older)
		}
	}
	byActivity := map[string]*Activity{}
	for _, pk := range []string{agentPK1, agentPK2} {
		act, err := st.Activity(t.Context(), pk)
		if err != nil {
			t.Fatal(err)
		}
		byActivity[pk] = act
	}
	check("Activity", byActivity)
	recs, err := st.Records(t.Context(), []string{agentPK1, agentPK2})
	if err != nil {
		t.Fatal(err)
	}
	check("Records", map[string]*Activity{agentPK1: recs[0].Activity, agentPK2: recs[1].Activity})
	all, err := st.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	check("All", map[string]*Activity{all[0].Agent.Pubkey: all[0].Activity, all[1].Agent.Pubkey: all[1].Activity})
	each := map[string]*Activity{}
	if err := st.Each(t.Context(), func(a *Agent, act *Activity, _ bool) error {
		each[a.Pubkey] = act.clone()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("Each", each)

	// The next post starts from the JSON record and writes the binary form.
	if _, err := st.RecordPosts(t.Context(), []Post{{ID: "p2", Pubkey: agentPK2}}, func(_ *Agent, act *Activity, _ Post) error {
		act.Posts++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	act, err := st.Activity(t.Context(), agentPK2)
	if err != nil {
		t.Fatal(err)
	}
	older.Posts++
	if !reflect.DeepEqual(act, &older) {
		t.Errorf("after a post: %+v, want %+v", act, older)
	}
}

// A damaged binary record is an error, never a panic nor a large
// allocation, whatever its bytes.
func TestDamagedActivityRecordsAreRefused(t *testing.T) {
	good := marshalActivity(&Activity{Days: []int32{1, 2}, Skels: []Skeleton{{At: 5, Hash: 9}}, Posts: 2})
	for _, raw := range [][]byte{
		good[:len(good)-1],                                      // cut short
		append(good[:len(good):len(good)], 0),                   // trailing byte
		{activityBinary, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, // 4 G days announced
		{activityBinary},
	} {
		var act Activity
		if err := unmarshalActivity(raw, &act); !errors.Is(err, errActivityRecord) {
			t.Errorf("%x: %v, %+v", raw, err, act)
		}
	}
}

func FuzzActivityRecord(f *testing.F) {
	f.Add(marshalActivity(&Activity{Days: []int32{1, 2}, Times: []int64{3}, Skels: []Skeleton{{At: 5, Hash: 9}}, Posts: 2}))
	f.Add([]byte(`{"n":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var act Activity
		if unmarshalActivity(raw, &act) != nil {
			return
		}
		// Compared encoded: an empty list and none are the same record.
		var again Activity
		b := marshalActivity(&act)
		if err := unmarshalActivity(b, &again); err != nil || !bytes.Equal(marshalActivity(&again), b) {
			t.Errorf("%x: %+v, then %+v (%v)", raw, act, again, err)
		}
	})
}
