package members

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Two-factor sign-in: TOTP (RFC 6238: SHA-1, 6 digits, 30-second steps, as
// every authenticator app reads an otpauth:// URI by default) with ten
// one-time recovery codes. The TOTP secret must be kept as it is to check
// codes; recovery codes are kept only as SHA-256 digests.

// TwoFactor is a member's second factor.
type TwoFactor struct {
	Secret          string    `json:"secret"`
	EnabledAt       time.Time `json:"enabled_at"`
	RecoveryDigests []string  `json:"recovery_digests"`
	// LastStep is the time step of the last code accepted: a code of that
	// step or an earlier one is refused (RFC 6238 §5.2), so a code seen
	// over someone's shoulder can't be used again.
	LastStep uint64 `json:"last_step"`
}

// Parameters of two-factor sign-in.
const (
	TOTPPeriod = 30
	TOTPDigits = 6
	// TOTPSkew is how many steps before and after now a code may be from
	// (clock drift, the time to type it).
	TOTPSkew = 1
	// RecoveryCodeCount recovery codes are made when two-factor sign-in is
	// turned on.
	RecoveryCodeCount = 10
	// TwoFactorSetupLifetime bounds how long a secret shown for setup waits
	// for its confirming code.
	TwoFactorSetupLifetime = 15 * time.Minute
)

// Errors of the second-factor checks.
var (
	ErrWrongCode    = errors.New("wrong code")
	ErrCodeReused   = errors.New("this code was already used; wait for the next one")
	ErrNoSetup      = errors.New("no two-factor setup is waiting for a code; start again")
	ErrTwoFactorOff = errors.New("two-factor sign-in is not on for this account")
	ErrTwoFactorOn  = errors.New("two-factor sign-in is already on for this account")
)

func twoFactorKey(memberID string) []byte      { return storage.Key("u", memberID, "2fa", "on") }
func twoFactorSetupKey(memberID string) []byte { return storage.Key("u", memberID, "2fa", "setup") }

// totpStep is the RFC 6238 time step of t.
func totpStep(t time.Time) uint64 { return uint64(t.Unix()) / TOTPPeriod }

// totpCode is the code of secret for step.
func totpCode(secret string, step uint64) (string, error) {
	return hotp.GenerateCodeCustom(secret, step, hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
}

// TOTPCode is the code an authenticator app shows for secret at t (for the
// operator's tests and the interop suite).
func TOTPCode(secret string, t time.Time) (string, error) { return totpCode(secret, totpStep(t)) }

// matchTOTP returns the step within the skew whose code is code, after
// LastStep.
func matchTOTP(secret, code string, lastStep uint64, now time.Time) (uint64, error) {
	if len(code) != TOTPDigits || strings.Trim(code, "0123456789") != "" {
		return 0, ErrWrongCode
	}
	cur := totpStep(now)
	reused := false
	for s := cur - TOTPSkew; s <= cur+TOTPSkew; s++ {
		want, err := totpCode(secret, s)
		if err != nil {
			return 0, err
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			if s <= lastStep {
				reused = true
				continue
			}
			return s, nil
		}
	}
	if reused {
		return 0, ErrCodeReused
	}
	return 0, ErrWrongCode
}

// normalizeRecoveryCode drops spaces and dashes and lowers the case, so
// "ABCDE-FGHIJ" and "abcdefghij" are the same code.
func normalizeRecoveryCode(s string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, s))
}

const recoveryAlphabet = "abcdefghjkmnpqrstuvwxyz23456789"

// newRecoveryCodes returns n codes of 10 characters (about 49 bits each),
// shown as "xxxxx-xxxxx".
func newRecoveryCodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 10)
		if _, err := rand.Read(b); err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		for j := range b {
			// 256 % 31 != 0: the small bias costs under a bit of entropy.
			b[j] = recoveryAlphabet[int(b[j])%len(recoveryAlphabet)]
		}
		out[i] = string(b[:5]) + "-" + string(b[5:])
	}
	return out
}

// StartTwoFactorSetup keeps secret (base32, as otpauth:// URIs carry it)
// for memberID until a code made from it confirms it, for at most
// TwoFactorSetupLifetime. Starting again replaces the secret.
func (s Store) StartTwoFactorSetup(ctx context.Context, memberID, secret string) error {
	if _, err := totpCode(secret, 0); err != nil || secret == "" || len(secret) > 128 {
		return storage.Invalid("the two-factor secret must be base32")
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByID(tx, memberID)
		if err != nil {
			return err
		}
		if m.TwoFactor {
			return ErrTwoFactorOn
		}
		return tx.Put(twoFactorSetupKey(memberID), []byte(secret), TwoFactorSetupLifetime)
	})
}

// TwoFactorSetupSecret returns the secret waiting for confirmation, or
// ErrNoSetup.
func (s Store) TwoFactorSetupSecret(ctx context.Context, memberID string) (string, error) {
	var secret []byte
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		secret, err = tx.Get(twoFactorSetupKey(memberID))
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return "", ErrNoSetup
	}
	return string(secret), err
}

// ConfirmTwoFactor turns two-factor sign-in on for memberID when code is a
// current code of the secret waiting for confirmation, and returns the new
// recovery codes (shown once; only their digests are kept). As a password
// change does, it ends every web session of the member except the one
// whose cookie secret is keepSession (the browser that turned it on; ""
// ends them all): a session started by someone who knew only the password
// must not outlive the second factor.
func (s Store) ConfirmTwoFactor(ctx context.Context, memberID, code, keepSession string) ([]string, error) {
	codes, digests := recoveryCodesAndDigests()
	keep := keptDigest(keepSession)
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByID(tx, memberID)
		if err != nil {
			return err
		}
		if m.TwoFactor {
			return ErrTwoFactorOn
		}
		secret, err := tx.Get(twoFactorSetupKey(memberID))
		if errors.Is(err, storage.ErrNotFound) {
			return ErrNoSetup
		}
		if err != nil {
			return err
		}
		step, err := matchTOTP(string(secret), strings.TrimSpace(code), 0, time.Now())
		if err != nil {
			return err
		}
		tf := TwoFactor{Secret: string(secret), EnabledAt: time.Now().UTC(), RecoveryDigests: digests, LastStep: step}
		if err := tx.PutJSON(twoFactorKey(memberID), tf, 0); err != nil {
			return err
		}
		if err := tx.Delete(twoFactorSetupKey(memberID)); err != nil {
			return err
		}
		m.TwoFactor = true
		_, err = renewStamp(tx, m, keep)
		return err
	})
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// CheckSecondFactor accepts a current TOTP code of memberID (once: a code of
// a step already used is ErrCodeReused) or one of its recovery codes (which
// is then used up). It returns whether a recovery code was used, or
// ErrWrongCode, ErrCodeReused or ErrTwoFactorOff.
func (s Store) CheckSecondFactor(ctx context.Context, memberID, code string) (recovery bool, err error) {
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		var err error
		recovery, err = checkSecondFactor(tx, memberID, code)
		return err
	})
	return recovery, err
}

// checkSecondFactor is CheckSecondFactor in tx. Its refusals
// (isSecondFactorRefusal) write nothing.
func checkSecondFactor(tx *storage.Tx, memberID, code string) (recovery bool, err error) {
	code = strings.TrimSpace(code)
	if code == "" || len(code) > 64 {
		return false, ErrWrongCode
	}
	var tf TwoFactor
	if err := tx.GetJSON(twoFactorKey(memberID), &tf); errors.Is(err, storage.ErrNotFound) {
		return false, ErrTwoFactorOff
	} else if err != nil {
		return false, err
	}
	if len(code) == TOTPDigits {
		step, err := matchTOTP(tf.Secret, code, tf.LastStep, time.Now())
		if err != nil {
			return false, err
		}
		tf.LastStep = step
		return false, tx.PutJSON(twoFactorKey(memberID), tf, 0)
	}
	d := storage.Digest(normalizeRecoveryCode(code))
	for i, have := range tf.RecoveryDigests {
		if subtle.ConstantTimeCompare([]byte(have), []byte(d)) == 1 {
			tf.RecoveryDigests = append(tf.RecoveryDigests[:i:i], tf.RecoveryDigests[i+1:]...)
			return true, tx.PutJSON(twoFactorKey(memberID), tf, 0)
		}
	}
	return false, ErrWrongCode
}

// isSecondFactorRefusal reports whether err is checkSecondFactor's answer
// to the code rather than a failure of the store.
func isSecondFactorRefusal(err error) bool {
	return errors.Is(err, ErrWrongCode) || errors.Is(err, ErrCodeReused) || errors.Is(err, ErrTwoFactorOff)
}

// NewRecoveryCodes replaces memberID's recovery codes with RecoveryCodeCount
// new ones and returns them (shown once; the old ones stop working).
func (s Store) NewRecoveryCodes(ctx context.Context, memberID string) ([]string, error) {
	codes, digests := recoveryCodesAndDigests()
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var tf TwoFactor
		if err := tx.GetJSON(twoFactorKey(memberID), &tf); errors.Is(err, storage.ErrNotFound) {
			return ErrTwoFactorOff
		} else if err != nil {
			return err
		}
		tf.RecoveryDigests = digests
		return tx.PutJSON(twoFactorKey(memberID), tf, 0)
	})
	if err != nil {
		return nil, err
	}
	return codes, nil
}

func recoveryCodesAndDigests() ([]string, []string) {
	codes := newRecoveryCodes(RecoveryCodeCount)
	digests := make([]string, len(codes))
	for i, c := range codes {
		digests[i] = storage.Digest(normalizeRecoveryCode(c))
	}
	return codes, digests
}

// TwoFactorStatus reports whether memberID has two-factor sign-in on, and
// how many recovery codes are left.
func (s Store) TwoFactorStatus(ctx context.Context, memberID string) (on bool, recoveryLeft int, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		var tf TwoFactor
		err := tx.GetJSON(twoFactorKey(memberID), &tf)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		on, recoveryLeft = true, len(tf.RecoveryDigests)
		return nil
	})
	return on, recoveryLeft, err
}

// DisableTwoFactor turns two-factor sign-in off for memberID (the caller
// has checked what it must) and, as every change of credentials does, ends
// its web sessions and sign-ins in flight except the session whose cookie
// secret is keepSession (the browser that turned it off; "" ends them
// all). Turning it off when it is off is no error and changes nothing.
func (s Store) DisableTwoFactor(ctx context.Context, memberID, keepSession string) error {
	keep := keptDigest(keepSession)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := disableTwoFactor(tx, memberID)
		if err != nil || m == nil {
			return err
		}
		_, err = renewStamp(tx, m, keep)
		return err
	})
}

// disableTwoFactor removes memberID's second factor in tx and returns the
// member with TwoFactor turned off, not written yet, or nil when it was
// off (the caller writes it with renewStamp).
func disableTwoFactor(tx *storage.Tx, memberID string) (*Member, error) {
	m, err := ByID(tx, memberID)
	if err != nil {
		return nil, err
	}
	if err := tx.Delete(twoFactorKey(memberID)); err != nil {
		return nil, err
	}
	if err := tx.Delete(twoFactorSetupKey(memberID)); err != nil {
		return nil, err
	}
	if !m.TwoFactor {
		return nil, nil
	}
	m.TwoFactor = false
	return m, nil
}

// Sign-in challenges: the state between a right password and the second
// factor. A challenge is a random secret kept by the browser in a cookie
// (the store holds its digest); it carries no session, lives for
// SignInChallengeLifetime and allows MaxChallengeAttempts wrong codes.

// SignInChallengePrefix starts every challenge secret.
const SignInChallengePrefix = "h2f_"

// Bounds of a sign-in challenge.
const (
	SignInChallengeLifetime = 5 * time.Minute
	MaxChallengeAttempts    = 5
)

type signInChallenge struct {
	MemberID  string    `json:"member_id"`
	ExpiresAt time.Time `json:"expires_at"`
	Failures  int       `json:"failures"`
	// Stamp is the member's security stamp when the password was checked:
	// a change of credentials since ends the challenge.
	Stamp string `json:"stamp,omitempty"`
}

func challengeKey(digest string) []byte { return storage.Key("2fa", "challenge", digest) }

// deleteMemberChallenges removes a deleted member's sign-in challenges
// (they live SignInChallengeLifetime).
func deleteMemberChallenges(tx *storage.Tx, memberID string) error {
	return deleteRecordsOf(tx, storage.Key("2fa", "challenge", ""), memberID)
}

// CreateSignInChallenge records that m (as read when its password was
// checked) gave the right password and returns the challenge's secret. It
// returns ErrCredentialsChanged when m's credentials changed since.
func (s Store) CreateSignInChallenge(ctx context.Context, m *Member) (string, error) {
	secret := storage.NewSecret(SignInChallengePrefix, 32)
	c := signInChallenge{MemberID: m.ID, ExpiresAt: time.Now().UTC().Add(SignInChallengeLifetime), Stamp: m.SecurityStamp}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if _, err := CheckStamp(tx, m); err != nil {
			return err
		}
		return tx.PutJSON(challengeKey(storage.Digest(secret)), c, SignInChallengeLifetime)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// SignInChallengeMember returns the member of a live challenge, or
// storage.ErrNotFound.
func (s Store) SignInChallengeMember(ctx context.Context, secret string) (*Member, error) {
	if !strings.HasPrefix(secret, SignInChallengePrefix) || len(secret) > 128 {
		return nil, storage.ErrNotFound
	}
	var m *Member
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var c signInChallenge
		if err := tx.GetJSON(challengeKey(storage.Digest(secret)), &c); err != nil {
			return err
		}
		if !time.Now().Before(c.ExpiresAt) {
			return storage.ErrNotFound
		}
		var err error
		m, err = ByID(tx, c.MemberID)
		if err == nil && m.SecurityStamp != c.Stamp {
			return storage.ErrNotFound
		}
		return err
	})
	return m, err
}

// AnswerSignInChallenge checks code (a TOTP or recovery code) for the
// challenge. On success the challenge is used up and the member returned;
// a wrong code counts against the challenge, which ends after
// MaxChallengeAttempts of them (storage.ErrNotFound from then on). The check and
// the count are one transaction, so concurrent answers to one challenge
// are checked MaxChallengeAttempts times at most.
func (s Store) AnswerSignInChallenge(ctx context.Context, secret, code string) (*Member, bool, error) {
	if !strings.HasPrefix(secret, SignInChallengePrefix) || len(secret) > 128 {
		return nil, false, storage.ErrNotFound
	}
	d := storage.Digest(secret)
	var m *Member
	var recovery bool
	var cerr error
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		m, recovery, cerr = nil, false, nil
		var c signInChallenge
		if err := tx.GetJSON(challengeKey(d), &c); err != nil {
			return err
		}
		if !time.Now().Before(c.ExpiresAt) || c.Failures >= MaxChallengeAttempts {
			return storage.ErrNotFound
		}
		member, err := ByID(tx, c.MemberID)
		if err != nil {
			return err
		}
		if member.SecurityStamp != c.Stamp {
			// The password or second factor changed since the password
			// was checked: this sign-in is over.
			return storage.ErrNotFound
		}
		recovery, cerr = checkSecondFactor(tx, member.ID, code)
		if cerr != nil && !isSecondFactorRefusal(cerr) {
			return cerr
		}
		if cerr == nil || c.Failures+1 >= MaxChallengeAttempts {
			if cerr == nil {
				m = member
			}
			return tx.Delete(challengeKey(d))
		}
		c.Failures++
		return tx.PutJSON(challengeKey(d), c, time.Until(c.ExpiresAt))
	})
	if err != nil {
		return nil, false, err
	}
	if cerr != nil {
		return nil, false, cerr
	}
	return m, recovery, nil
}

// DeleteSignInChallenge ends a challenge; unknown ones are ignored.
func (s Store) DeleteSignInChallenge(ctx context.Context, secret string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error { return tx.Delete(challengeKey(storage.Digest(secret))) })
}
