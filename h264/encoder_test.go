package h264

import (
	"errors"
	"io/fs"
	"testing"
)

// TestUnavailable: an error of Unavailable is ErrUnavailable and its
// cause, and Why gives a person the reason without ErrUnavailable's
// words, each part where there is one.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		err       error
		why, text string
	}{
		{Unavailable("no encoder here", nil), "no encoder here", "h264: no encoder available: no encoder here"},
		{Unavailable("", fs.ErrNotExist), "file does not exist", "h264: no encoder available: file does not exist"},
		{Unavailable("ffmpeg is not installed (ffmpeg)", fs.ErrNotExist), "ffmpeg is not installed (ffmpeg): file does not exist",
			"h264: no encoder available: ffmpeg is not installed (ffmpeg): file does not exist"},
	} {
		if !errors.Is(c.err, ErrUnavailable) {
			t.Errorf("%v is not ErrUnavailable", c.err)
		}
		if got := Why(c.err); got != c.why {
			t.Errorf("Why = %q, want %q", got, c.why)
		}
		if got := c.err.Error(); got != c.text {
			t.Errorf("Error = %q, want %q", got, c.text)
		}
	}
	if !errors.Is(Unavailable("", fs.ErrNotExist), fs.ErrNotExist) {
		t.Error("the cause is lost")
	}
	if got := Why(errors.New("other")); got != "other" {
		t.Errorf("Why of another error = %q", got)
	}
}
