package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

const testSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

func TestTwoFactorSetupAndCodes(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember("alice", "", "correct horse")
	if _, err := st.ConfirmTwoFactor(m.ID, "123456"); !errors.Is(err, ErrNoSetup) {
		t.Fatalf("confirm without setup: %v", err)
	}
	if err := st.StartTwoFactorSetup(m.ID, "not base32!"); !IsInvalid(err) {
		t.Fatalf("bad secret: %v", err)
	}
	if err := st.StartTwoFactorSetup(m.ID, testSecret); err != nil {
		t.Fatal(err)
	}
	if got, err := st.TwoFactorSetupSecret(m.ID); err != nil || got != testSecret {
		t.Fatalf("setup secret %q %v", got, err)
	}
	// A wrong code leaves it off.
	now, _ := TOTPCode(testSecret, time.Now())
	wrong := "000000"
	if wrong == now {
		wrong = "111111"
	}
	if _, err := st.ConfirmTwoFactor(m.ID, wrong); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("wrong confirm code: %v", err)
	}
	if on, _, _ := st.TwoFactorStatus(m.ID); on {
		t.Fatal("on after a wrong code")
	}
	codes, err := st.ConfirmTwoFactor(m.ID, now)
	if err != nil || len(codes) != RecoveryCodeCount {
		t.Fatalf("confirm: %v %v", codes, err)
	}
	if got, _ := st.MemberByID(m.ID); !got.TwoFactor {
		t.Fatal("member flag not set")
	}
	// The code that confirmed can't sign in; nor a wrong one.
	if _, err := st.CheckSecondFactor(m.ID, now); !errors.Is(err, ErrCodeReused) {
		t.Fatalf("confirming code reused: %v", err)
	}
	if _, err := st.CheckSecondFactor(m.ID, wrong); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("wrong code: %v", err)
	}
	// The next step's code (within the skew) is accepted once.
	next, _ := TOTPCode(testSecret, time.Now().Add(TOTPPeriod*time.Second))
	if next != now {
		if rec, err := st.CheckSecondFactor(m.ID, next); err != nil || rec {
			t.Fatalf("next code: %v %v", rec, err)
		}
		if _, err := st.CheckSecondFactor(m.ID, next); !errors.Is(err, ErrCodeReused) {
			t.Fatalf("next code twice: %v", err)
		}
	}
	// Recovery codes: any case and dashes, each once; stored only hashed.
	var dump bytes.Buffer
	if err := st.Backup(&dump); err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if bytes.Contains(dump.Bytes(), []byte(c)) || bytes.Contains(dump.Bytes(), []byte(normalizeRecoveryCode(c))) {
			t.Fatal("a recovery code is stored in the clear")
		}
	}
	if rec, err := st.CheckSecondFactor(m.ID, strings.ToUpper(strings.ReplaceAll(codes[3], "-", ""))); err != nil || !rec {
		t.Fatalf("recovery code: %v %v", rec, err)
	}
	if _, err := st.CheckSecondFactor(m.ID, codes[3]); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("used recovery code accepted again: %v", err)
	}
	if _, left, _ := st.TwoFactorStatus(m.ID); left != RecoveryCodeCount-1 {
		t.Fatalf("recovery codes left %d", left)
	}
	if err := st.DisableTwoFactor(m.ID); err != nil {
		t.Fatal(err)
	}
	if on, _, _ := st.TwoFactorStatus(m.ID); on {
		t.Fatal("still on")
	}
	if got, _ := st.MemberByID(m.ID); got.TwoFactor {
		t.Fatal("member flag still set")
	}
	if _, err := st.CheckSecondFactor(m.ID, codes[4]); !errors.Is(err, ErrTwoFactorOff) {
		t.Fatalf("code after disable: %v", err)
	}
}

func TestSignInChallenge(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember("alice", "", "correct horse")
	_ = st.StartTwoFactorSetup(m.ID, testSecret)
	now, _ := TOTPCode(testSecret, time.Now().Add(-TOTPPeriod*time.Second))
	codes, err := st.ConfirmTwoFactor(m.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.CreateSignInChallenge(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.SignInChallengeMember(c); err != nil || got.ID != m.ID {
		t.Fatalf("challenge member %v %v", got, err)
	}
	for range MaxChallengeAttempts - 1 {
		if _, _, err := st.AnswerSignInChallenge(c, "zzzzz-zzzzz"); !errors.Is(err, ErrWrongCode) {
			t.Fatalf("wrong answer: %v", err)
		}
	}
	if got, rec, err := st.AnswerSignInChallenge(c, codes[0]); err != nil || !rec || got.ID != m.ID {
		t.Fatalf("right answer after 4 wrong: %v %v %v", got, rec, err)
	}
	if _, _, err := st.AnswerSignInChallenge(c, codes[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("challenge used twice: %v", err)
	}
	// Too many wrong answers end the challenge.
	c2, _ := st.CreateSignInChallenge(m.ID)
	for range MaxChallengeAttempts {
		_, _, _ = st.AnswerSignInChallenge(c2, "zzzzz-zzzzz")
	}
	if _, _, err := st.AnswerSignInChallenge(c2, codes[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("challenge after too many failures: %v", err)
	}
	if _, err := st.SignInChallengeMember("h2f_unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown challenge: %v", err)
	}
}

// Deleting a member deletes its reset links and sign-in challenges (global
// keys, found by the member id in their records): nothing in the store
// names the member afterwards.
func TestDeleteMemberDeletesResetLinksAndChallenges(t *testing.T) {
	st, m := openSavedTest(t)
	other, err := st.CreateMember("other", "", "other password")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.CreateResetLink(m.Username, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSignInChallenge(m.ID); err != nil {
		t.Fatal(err)
	}
	keep, _, _, err := st.CreateResetLink(other.Username, time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMember(m.Username); err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *Tx) error {
		return tx.scan(nil, nil, false, false, func(k, v []byte) (bool, error) {
			if strings.Contains(string(k), m.ID) || strings.Contains(string(v), m.ID) {
				t.Errorf("after the delete, %q names the member: %q", k, v)
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.ResetLinkMember(keep); err != nil || got.ID != other.ID {
		t.Fatalf("another member's reset link: %v %v", got, err)
	}
}
