package client

import (
	"context"
	"encoding/base32"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pquerna/otp/hotp"

	"kvmd/internal/sleep"
)

// The daemon's 2FA codes (docs/api.md, "2FA codes"): 6 digits of TOTP (RFC 6238,
// SHA1) over 30 s steps. It accepts the codes of the previous, current and
// next step (auth/totp.go: Skew 1).
const (
	// Period is the length of a step: a code is valid for one.
	Period = 30 * time.Second
	// MinCodeLife is how long a code must stay valid after it is sent. A
	// code with this much or less left could expire on its way, or while
	// a slow password hash is checked before it: the client waits for the
	// next step and sends that code instead.
	MinCodeLife = time.Second
)

// Code returns the 2FA code of secret for the step that t is in.
func Code(secret string, t time.Time) (string, error) {
	return codeAt(secret, stepOf(t))
}

func stepOf(t time.Time) int64 { return t.Unix() / int64(Period/time.Second) }

func stepEnd(step int64) time.Time { return time.Unix((step+1)*int64(Period/time.Second), 0) }

func codeAt(secret string, step int64) (string, error) {
	s, err := normSecret(secret)
	if err != nil {
		return "", err
	}
	return hotp.GenerateCode(s, uint64(step))
}

// normSecret returns secret in upper case without blanks or padding, as
// authenticator apps accept it.
func normSecret(secret string) (string, error) {
	s := strings.ToUpper(strings.Join(strings.Fields(secret), ""))
	s = strings.TrimRight(s, "=")
	if _, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(s); err != nil || s == "" {
		return "", errors.New("client: the 2FA secret is not base32")
	}
	return s, nil
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	return sleep.For(ctx, d)
}

// codeStep returns the step whose code to send now: the current one, or,
// when it has MinCodeLife or less left, the next one after sleeping until
// it begins. The next step is taken from the arithmetic, not from the
// clock read again, so that the result does not depend on how exactly the
// sleep ended.
func (c *Client) codeStep(ctx context.Context) (int64, error) {
	now := c.now()
	step := stepOf(now)
	if left := stepEnd(step).Sub(now); left <= MinCodeLife {
		if err := c.sleep(ctx, left); err != nil {
			return 0, err
		}
		step++
	}
	return step, nil
}

// withPassword calls send with Password, followed by the 2FA code when
// there is a TOTPSecret. When the daemon refuses that (403), the code may
// have been the culprit (a clock a little behind the daemon's): send is
// called once more with the next step's code, which the daemon accepts at
// once since it allows one step of drift. A second 403 is returned as it
// is: the password is wrong, or the clocks are too far apart.
func (c *Client) withPassword(ctx context.Context, send func(passwd string) (*http.Response, error)) (*http.Response, error) {
	if c.TOTPSecret == "" {
		return send(c.Password)
	}
	if _, err := normSecret(c.TOTPSecret); err != nil {
		return nil, err
	}
	step, err := c.codeStep(ctx)
	if err != nil {
		return nil, err
	}
	code, err := codeAt(c.TOTPSecret, step)
	if err != nil {
		return nil, err
	}
	resp, err := send(c.Password + code)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		return resp, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	code, err = codeAt(c.TOTPSecret, step+1)
	if err != nil {
		return nil, err
	}
	return send(c.Password + code)
}
