package members

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

const testSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

func TestTwoFactorSetupAndCodes(t *testing.T) {
	st := openTestStore(t)
	m, _ := st.CreateMember(t.Context(), "alice", "", "correct horse")
	if _, err := st.ConfirmTwoFactor(t.Context(), m.ID, "123456", ""); !errors.Is(err, ErrNoSetup) {
		t.Fatalf("confirm without setup: %v", err)
	}
	if err := st.StartTwoFactorSetup(t.Context(), m.ID, "not base32!"); !storage.IsInvalid(err) {
		t.Fatalf("bad secret: %v", err)
	}
	if err := st.StartTwoFactorSetup(t.Context(), m.ID, testSecret); err != nil {
		t.Fatal(err)
	}
	if got, err := st.TwoFactorSetupSecret(t.Context(), m.ID); err != nil || got != testSecret {
		t.Fatalf("setup secret %q %v", got, err)
	}
	// A wrong code leaves it off.
	now, _ := TOTPCode(testSecret, time.Now())
	wrong := "000000"
	if wrong == now {
		wrong = "111111"
	}
	if _, err := st.ConfirmTwoFactor(t.Context(), m.ID, wrong, ""); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("wrong confirm code: %v", err)
	}
	if on, _, _ := st.TwoFactorStatus(t.Context(), m.ID); on {
		t.Fatal("on after a wrong code")
	}
	codes, err := st.ConfirmTwoFactor(t.Context(), m.ID, now, "")
	if err != nil || len(codes) != RecoveryCodeCount {
		t.Fatalf("confirm: %v %v", codes, err)
	}
	if got, _ := st.MemberByID(t.Context(), m.ID); !got.TwoFactor {
		t.Fatal("member flag not set")
	}
	// The code that confirmed can't sign in; nor a wrong one.
	if _, err := st.CheckSecondFactor(t.Context(), m.ID, now); !errors.Is(err, ErrCodeReused) {
		t.Fatalf("confirming code reused: %v", err)
	}
	if _, err := st.CheckSecondFactor(t.Context(), m.ID, wrong); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("wrong code: %v", err)
	}
	// The next step's code (within the skew) is accepted once.
	next, _ := TOTPCode(testSecret, time.Now().Add(TOTPPeriod*time.Second))
	if next != now {
		if rec, err := st.CheckSecondFactor(t.Context(), m.ID, next); err != nil || rec {
			t.Fatalf("next code: %v %v", rec, err)
		}
		if _, err := st.CheckSecondFactor(t.Context(), m.ID, next); !errors.Is(err, ErrCodeReused) {
			t.Fatalf("next code twice: %v", err)
		}
	}
	// Recovery codes: any case and dashes, each once; stored only hashed.
	var dump bytes.Buffer
	if err := st.st.Backup(&dump); err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if bytes.Contains(dump.Bytes(), []byte(c)) || bytes.Contains(dump.Bytes(), []byte(normalizeRecoveryCode(c))) {
			t.Fatal("a recovery code is stored in the clear")
		}
	}
	if rec, err := st.CheckSecondFactor(t.Context(), m.ID, strings.ToUpper(strings.ReplaceAll(codes[3], "-", ""))); err != nil || !rec {
		t.Fatalf("recovery code: %v %v", rec, err)
	}
	if _, err := st.CheckSecondFactor(t.Context(), m.ID, codes[3]); !errors.Is(err, ErrWrongCode) {
		t.Fatalf("used recovery code accepted again: %v", err)
	}
	if _, left, _ := st.TwoFactorStatus(t.Context(), m.ID); left != RecoveryCodeCount-1 {
		t.Fatalf("recovery codes left %d", left)
	}
	if err := st.DisableTwoFactor(t.Context(), m.ID, ""); err != nil {
		t.Fatal(err)
	}
	if on, _, _ := st.TwoFactorStatus(t.Context(), m.ID); on {
		t.Fatal("still on")
	}
	if got, _ := st.MemberByID(t.Context(), m.ID); got.TwoFactor {
		t.Fatal("member flag still set")
	}
	if _, err := st.CheckSecondFactor(t.Context(), m.ID, codes[4]); !errors.Is(err, ErrTwoFactorOff) {
		t.Fatalf("code after disable: %v", err)
	}
}

// withTwoFactor turns two-factor sign-in on for m (testSecret, confirmed
// with the code of at) and returns m as a sign-in reads it then, with its
// recovery codes.
func withTwoFactor(t *testing.T, st Store, m *Member, at time.Time) (*Member, []string) {
	t.Helper()
	if err := st.StartTwoFactorSetup(t.Context(), m.ID, testSecret); err != nil {
		t.Fatal(err)
	}
	code, _ := TOTPCode(testSecret, at)
	codes, err := st.ConfirmTwoFactor(t.Context(), m.ID, code, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err = st.MemberByID(t.Context(), m.ID); err != nil {
		t.Fatal(err)
	}
	return m, codes
}

// challengedAlice makes alice, a member with a second factor, and a
// sign-in challenge of hers.
func challengedAlice(t *testing.T, st Store) (m *Member, codes []string, challenge string) {
	t.Helper()
	m, _ = st.CreateMember(t.Context(), "alice", "", "correct horse")
	// The code of now: one of the previous step would be refused when a
	// step boundary passed before the confirmation.
	m, codes = withTwoFactor(t, st, m, time.Now())
	challenge, err := st.CreateSignInChallenge(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	return m, codes, challenge
}

func TestSignInChallenge(t *testing.T) {
	st := openTestStore(t)
	m, codes, c := challengedAlice(t, st)
	if got, err := st.SignInChallengeMember(t.Context(), c); err != nil || got.ID != m.ID {
		t.Fatalf("challenge member %v %v", got, err)
	}
	for range MaxChallengeAttempts - 1 {
		if _, _, err := st.AnswerSignInChallenge(t.Context(), c, "zzzzz-zzzzz"); !errors.Is(err, ErrWrongCode) {
			t.Fatalf("wrong answer: %v", err)
		}
	}
	if got, rec, err := st.AnswerSignInChallenge(t.Context(), c, codes[0]); err != nil || !rec || got.ID != m.ID {
		t.Fatalf("right answer after 4 wrong: %v %v %v", got, rec, err)
	}
	if _, _, err := st.AnswerSignInChallenge(t.Context(), c, codes[1]); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("challenge used twice: %v", err)
	}
	// Too many wrong answers end the challenge.
	c2, _ := st.CreateSignInChallenge(t.Context(), m)
	for range MaxChallengeAttempts {
		_, _, _ = st.AnswerSignInChallenge(t.Context(), c2, "zzzzz-zzzzz")
	}
	if _, _, err := st.AnswerSignInChallenge(t.Context(), c2, codes[1]); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("challenge after too many failures: %v", err)
	}
	if _, err := st.SignInChallengeMember(t.Context(), "h2f_unknown"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown challenge: %v", err)
	}
}

// Deleting a member deletes its reset links and sign-in challenges (global
// keys, found by the member id in their records): nothing in the store
// names the member afterwards.
func TestDeleteMemberDeletesResetLinksAndChallenges(t *testing.T) {
	st := openTestStore(t)
	m, err := st.CreateMember(t.Context(), "reader", "", "password123")
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.CreateMember(t.Context(), "other", "", "other password")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.CreateResetLink(t.Context(), m.Username, time.Hour, ResetLinkOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSignInChallenge(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	keep, _, _, err := st.CreateResetLink(t.Context(), other.Username, time.Hour, ResetLinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	err = st.st.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan(nil, nil, false, false, func(k, v []byte) (bool, error) {
			if strings.Contains(string(k), m.ID) || strings.Contains(string(v), m.ID) {
				t.Errorf("after the delete, %q names the member: %q", k, v)
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.ResetLinkMember(t.Context(), keep); err != nil || got.ID != other.ID {
		t.Fatalf("another member's reset link: %v %v", got, err)
	}
}

// Concurrent wrong answers to one challenge: at most MaxChallengeAttempts
// of them are checked against the member's second factor, the rest find
// the challenge ended, and a right code after them is refused too (the
// count and the check are one transaction).
func TestSignInChallengeLimitUnderConcurrentAnswers(t *testing.T) {
	st := openTestStore(t)
	_, codes, c := challengedAlice(t, st)
	const answers = 40
	var wg sync.WaitGroup
	errs := make(chan error, answers)
	start := make(chan struct{})
	for range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, err := st.AnswerSignInChallenge(t.Context(), c, "zzzzz-zzzzz")
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	checked := 0
	for err := range errs {
		switch {
		case errors.Is(err, ErrWrongCode):
			checked++
		case errors.Is(err, storage.ErrNotFound):
		default:
			t.Fatalf("answer: %v", err)
		}
	}
	if checked > MaxChallengeAttempts || checked == 0 {
		t.Fatalf("%d of %d concurrent wrong answers were checked, want 1 to %d", checked, answers, MaxChallengeAttempts)
	}
	if _, _, err := st.AnswerSignInChallenge(t.Context(), c, codes[0]); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a right code after %d wrong ones: %v", checked, err)
	}
}
