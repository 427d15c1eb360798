package board

import (
	"errors"
	"fmt"
	"strings"

	"kvmd/hw"
)

// PlatformPath is PiKVM's platform file, relative to the root. PiKVM OS's
// platform package writes it (pikvm/kvmd PKGBUILD: three lines,
// "PIKVM_MODEL=<model>", "PIKVM_VIDEO=<video>", "PIKVM_BOARD=<board>",
// mode 444), kvmd reads it for /api/info (kvmd/apps/_scheme.py:
// kvmd.info.hw.platform, default /usr/lib/kvmd/platform;
// kvmd/apps/kvmd/info/system.py), and PiKVM's scripts source it with bash
// (platform.install, scripts/kvmd-bootconfig).
const PlatformPath = "usr/lib/kvmd/platform"

// Platform is what PiKVM's platform file says; an empty field is one the
// file does not set.
type Platform struct {
	Model, Video, Board string
}

// ReadPlatform reads the platform file below fs's root. Without one, the
// error wraps fs.ErrNotExist.
func ReadPlatform(fs hw.FS) (Platform, error) {
	b, err := fs.ReadFile(PlatformPath)
	if err != nil {
		return Platform{}, err
	}
	p, err := ParsePlatform(b)
	if err != nil {
		return p, fmt.Errorf("board: /%s: %w", PlatformPath, err)
	}
	return p, nil
}

// errNoKeys is a platform file that sets none of the three values.
var errNoKeys = errors.New("no PIKVM_MODEL, PIKVM_VIDEO or PIKVM_BOARD")

// ParsePlatform parses a platform file as kvmd does: each line holding a
// "=" is a key and a value, both trimmed of white space; other lines and
// other keys are ignored, and the last of a repeated key wins. A value
// quoted as a shell would read it ("v4plus" or 'v4plus') loses its quotes,
// since PiKVM's scripts source the file with bash. It is an error if the
// file sets none of the three keys.
func ParsePlatform(b []byte) (Platform, error) {
	var p Platform
	found := false
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		val = unquote(strings.TrimSpace(val))
		var dst *string
		switch strings.TrimSpace(key) {
		case "PIKVM_MODEL":
			dst = &p.Model
		case "PIKVM_VIDEO":
			dst = &p.Video
		case "PIKVM_BOARD":
			dst = &p.Board
		default:
			continue
		}
		*dst, found = val, true
	}
	if !found {
		return p, errNoKeys
	}
	return p, nil
}

// unquote removes one pair of matching shell quotes around s.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
