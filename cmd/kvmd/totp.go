package main

import (
	"encoding/base32"
	"errors"
	"fmt"
	"image/color"
	"io"
	"io/fs"
	"strings"

	"github.com/boombuler/barcode"
	"github.com/boombuler/barcode/qr"

	"kvmd/auth"
)

const totpUsage = "usage: kvmd totp init [-f] --secret FILE\n" +
	"       kvmd totp show|del --secret FILE"

// errTOTPDisabled is what show says about an empty or missing secret file.
var errTOTPDisabled = errors.New("2FA is not enabled")

// totpCmd runs "kvmd totp init|show|del --secret FILE". init writes a new
// secret and shows it; show prints the secret, its otpauth:// URI and a QR
// code of the URI for an authenticator app; del empties the file, which
// turns 2FA off. del never removes the file: the daemon treats a configured
// secret file that is missing as an error and refuses every login.
func totpCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	action, fset, err := subcommand("totp", args, []string{"init", "show", "del"}, totpUsage, stderr)
	if err != nil {
		return err
	}
	path := fset.String("secret", "", "the 2FA secret `FILE`")
	var force *bool
	if action == "init" {
		force = fset.Bool("f", false, "replace an existing secret")
	}
	rest, err := parseInterleaved(fset, args[1:])
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("totp %s: unexpected argument %q\n%s", action, rest[0], totpUsage)
	}
	if *path == "" {
		return fmt.Errorf("totp %s: --secret FILE is required\n%s", action, totpUsage)
	}

	file := auth.TOTPFile{Path: *path}
	switch action {
	case "init":
		secret, err := file.Init(auth.TOTPAccount(), *force)
		if errors.Is(err, auth.ErrTOTPExists) {
			return fmt.Errorf("totp init: %s already holds a 2FA secret; use -f to replace it "+
				"(authenticator apps set up with the old one will stop working)", *path)
		}
		if err != nil {
			return err
		}
		return showTOTP(stdout, secret)
	case "show":
		secret, err := file.Read()
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s does not exist", errTOTPDisabled, *path)
		}
		if err != nil {
			return err
		}
		if secret == "" {
			return fmt.Errorf("%w: %s is empty", errTOTPDisabled, *path)
		}
		return showTOTP(stdout, secret)
	default: // del
		return file.Clear()
	}
}

// showTOTP prints the secret, the otpauth:// URI an authenticator app
// enrolls with, and that URI as a QR code.
func showTOTP(w io.Writer, secret string) error {
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		return fmt.Errorf("the 2FA secret is not base32: %w", err)
	}
	key, err := auth.NewTOTPKey(auth.TOTPAccount(), raw)
	if err != nil {
		return fmt.Errorf("building otpauth URI: %w", err)
	}
	// The secret as authenticator apps take it when typed in: upper case,
	// no padding, whatever form the file holds.
	fmt.Fprintf(w, "Secret: %s\nURI:    %s\n\n", key.Secret(), key.URL())
	return writeQR(w, key.URL())
}

// qrQuietZone is the blank margin, in modules, the QR standard asks for
// around the code; scanners fail without it.
const qrQuietZone = 4

// Colours for the QR code: black on bright white, set explicitly.
// Terminal colours are unknown: drawn in the default colours, the code
// would be dark on light on one theme and inverted on the other, and many
// scanners (authenticator apps among them) do not read an inverted code.
// With both colours set, the code looks the same on every theme.
const (
	qrStart = "\x1b[30;107m" // black foreground, bright white background
	qrReset = "\x1b[0m"
)

// writeQR draws content as a QR code (medium error correction) with
// Unicode half blocks: one character cell holds two modules stacked, so
// the code stays about square in a terminal whose cells are twice as high
// as wide. A dark module is foreground (black) and a light one background
// (white): '█' both dark, '▀' top dark, '▄' bottom dark, ' ' both light.
func writeQR(w io.Writer, content string) error {
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		return fmt.Errorf("encoding QR code: %w", err)
	}
	m := qrModules(code)
	var b strings.Builder
	for y := 0; y < len(m); y += 2 {
		b.WriteString(qrStart)
		for x := range m[y] {
			top, bottom := m[y][x], y+1 < len(m) && m[y+1][x]
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteString(qrReset + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// qrModules returns the code's modules, true for dark, surrounded by the
// quiet zone, indexed [y][x].
func qrModules(code barcode.Barcode) [][]bool {
	bounds := code.Bounds()
	n := bounds.Dx() + 2*qrQuietZone
	m := make([][]bool, n)
	for y := range m {
		m[y] = make([]bool, n)
		for x := range m[y] {
			cx, cy := bounds.Min.X+x-qrQuietZone, bounds.Min.Y+y-qrQuietZone
			if cx < bounds.Min.X || cy < bounds.Min.Y || cx >= bounds.Max.X || cy >= bounds.Max.Y {
				continue
			}
			m[y][x] = color.GrayModel.Convert(code.At(cx, cy)).(color.Gray).Y < 0x80
		}
	}
	return m
}
