package httpd

import (
	"encoding/json"
	"errors"
	"image/color"
	"net/http"
	"strings"
	"time"

	"github.com/boombuler/barcode/qr"

	"kvmd/auth"
)

// TwoFactorEnroller turns 2FA on and off from the web UI: package auth's
// *Enroll.
type TwoFactorEnroller interface {
	Begin(user string, now time.Time) (secret, uri string, err error)
	Confirm(user, code string, now time.Time, by auth.Actor) error
	Disable(by auth.Actor) error
}

// errNoTOTPSecret answers the 2FA routes on a device started without
// --totp-secret: what to configure, for the web page to show as it is.
var errNoTOTPSecret = &Error{Status: http.StatusConflict, Name: "TwoFactorNotConfiguredError",
	Msg: "2FA is not set up on this device: it needs a file to keep its secret in. Start kvmd serve with " +
		"--totp-secret FILE (or totp-secret: FILE in /etc/kvmd/kvmd.yaml), then turn 2FA on here"}

// totpState answers GET /api/auth/totp (admin): whether 2FA is on.
func (s *Server) totpState(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.TwoFactor == nil {
		return errNoTOTPSecret
	}
	return WriteJSON(w, map[string]bool{"enabled": s.cfg.TwoFactorOn()})
}

// totpBegin answers POST /api/auth/totp/begin (admin): a new secret, its
// otpauth:// URI and the URI as a QR code's modules (rows of 0 and 1,
// quiet zone included), which the page draws: no image, no script from
// elsewhere. Nothing changes until the confirm.
func (s *Server) totpBegin(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.TwoFactor == nil {
		return errNoTOTPSecret
	}
	id := IdentityFrom(r.Context())
	secret, uri, err := s.cfg.TwoFactor.Begin(id.User, time.Now())
	if err != nil {
		return internalError(err)
	}
	rows, err := qrRows(uri)
	if err != nil {
		return internalError(err)
	}
	return WriteJSON(w, map[string]any{"secret": secret, "uri": uri, "qr": rows})
}

// totpConfirm answers POST /api/auth/totp/confirm {"code": "123456"}
// (admin): the begun secret is written, and 2FA is on, only when the code
// is its code now.
func (s *Server) totpConfirm(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.TwoFactor == nil {
		return errNoTOTPSecret
	}
	id := IdentityFrom(r.Context())
	body, err := requestBody(r)
	if err != nil {
		return BadRequest("Request body could not be read", err)
	}
	var req struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return BadRequest("Malformed JSON body: an object with code is expected", err)
	}
	if len(req.Code) != auth.CodeLen {
		return BadParam("code", "not 6 digits")
	}
	err = s.cfg.TwoFactor.Confirm(id.User, req.Code, time.Now(), s.actor(r, id))
	if errors.Is(err, auth.ErrForbidden) {
		return BadParam("code", "wrong or expired code, or no enrollment begun (begin again)")
	}
	if err != nil {
		return tokensFileError(err)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// totpDisable answers DELETE /api/auth/totp (admin): 2FA off.
func (s *Server) totpDisable(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.TwoFactor == nil {
		return errNoTOTPSecret
	}
	id := IdentityFrom(r.Context())
	if err := s.cfg.TwoFactor.Disable(s.actor(r, id)); err != nil {
		return tokensFileError(err)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// qrQuietZone is the blank margin, in modules, scanners need.
const qrQuietZone = 4

// qrRows encodes content as a QR code (medium error correction) and
// returns its modules as rows of '1' (dark) and '0'.
func qrRows(content string) ([]string, error) {
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		return nil, err
	}
	b := code.Bounds()
	n := b.Dx() + 2*qrQuietZone
	rows := make([]string, n)
	var sb strings.Builder
	for y := range n {
		sb.Reset()
		for x := range n {
			cx, cy := b.Min.X+x-qrQuietZone, b.Min.Y+y-qrQuietZone
			dark := cx >= b.Min.X && cy >= b.Min.Y && cx < b.Max.X && cy < b.Max.Y &&
				color.GrayModel.Convert(code.At(cx, cy)).(color.Gray).Y < 0x80
			if dark {
				sb.WriteByte('1')
			} else {
				sb.WriteByte('0')
			}
		}
		rows[y] = sb.String()
	}
	return rows, nil
}
