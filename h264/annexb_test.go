package h264

import (
	"encoding/hex"
	"testing"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseSPS reads SPSs libx264 wrote (testdata/SOURCES.md).
func TestParseSPS(t *testing.T) {
	for _, tc := range []struct {
		name, hex string
		want      SPS
		plid      string
	}{
		{"1080p baseline", "6742c028da01e0089f970110000003001000000303c8f1832a", SPS{0x42, 0xc0, 0x28, 1920, 1080}, "42C028"},
		{"720p high", "6764001facd9405005bb0110000003001000000303c0f1831960", SPS{0x64, 0x00, 0x1f, 1280, 720}, "64001F"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSPS(mustHex(t, tc.hex))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("ParseSPS = %+v, want %+v", got, tc.want)
			}
			if got.ProfileLevelID() != tc.plid {
				t.Errorf("ProfileLevelID = %s, want %s", got.ProfileLevelID(), tc.plid)
			}
		})
	}
	for _, bad := range []string{"", "67", "6742c028", "6842c028da01e0089f97", "6742c028ff"} {
		if _, err := ParseSPS(mustHex(t, bad)); err == nil {
			t.Errorf("ParseSPS(%s) took it", bad)
		}
	}
}

// TestSplitNALs splits units with three- and four-byte start codes and
// trailing zeros.
func TestSplitNALs(t *testing.T) {
	b := mustHex(t, "ff"+"00000001"+"6742"+"000001"+"68ce"+"00000001"+"6588ff00"+"000001"+"0600")
	got := SplitNALs(b)
	want := []string{"6742", "68ce", "6588ff", "0600"}
	if len(got) != len(want) {
		t.Fatalf("SplitNALs = %x, want %v", got, want)
	}
	for i := range want {
		if hex.EncodeToString(got[i]) != want[i] {
			t.Errorf("NAL %d = %x, want %s", i, got[i], want[i])
		}
	}
	if NALType(got[2]) != NALIDR || !HasType(b, NALPPS) || HasType(b, NALAUD) {
		t.Error("types misread")
	}
	if n := SplitNALs(mustHex(t, "0000")); len(n) != 0 {
		t.Errorf("no start code: %x", n)
	}
	if got := AppendNAL(nil, []byte{0x65}); hex.EncodeToString(got) != "0000000165" {
		t.Errorf("AppendNAL = %x", got)
	}
}

// FuzzParseSPS: no input makes ParseSPS panic or hang.
func FuzzParseSPS(f *testing.F) {
	f.Add(mustHexF("6742c028da01e0089f970110000003001000000303c8f1832a"))
	f.Add(mustHexF("6764001facd9405005bb0110000003001000000303c0f1831960"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSPS(b)
		if err == nil && (s.Width <= 0 || s.Height <= 0) {
			t.Errorf("a size of %dx%d", s.Width, s.Height)
		}
		SplitNALs(b)
	})
}

func mustHexF(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
