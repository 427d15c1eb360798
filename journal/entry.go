package journal

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits on what one entry may make a stream hold. journalctl prints a
// MESSAGE of any size on one line; the decoder keeps at most maxMessage
// bytes of it and counts the rest, so a huge entry costs a bounded buffer
// and a marker in the output, never an unbounded allocation.
const (
	maxMessage   = 1 << 20 // MESSAGE bytes kept per entry
	maxUnit      = 512     // unit names are at most 256 bytes
	maxTimestamp = 32      // a uint64 in decimal is 20
	maxKey       = 64      // journal field names are at most 64 bytes
)

// errSyntax reports a line that is not the JSON object journalctl writes.
var errSyntax = errors.New("journal: malformed JSON entry")

// entry is the part of a journal entry that a log line shows.
type entry struct {
	usec    int64 // __REALTIME_TIMESTAMP, microseconds since the epoch
	unit    field // _SYSTEMD_UNIT (its first value when there are several)
	message field // MESSAGE (its first value when there are several), raw bytes
}

// field is one decoded value, capped at max bytes.
type field struct {
	b       []byte
	max     int
	dropped int64 // bytes decoded past max
	set     bool  // the entry has this field (a JSON null does not count)
}

func (f *field) reset() {
	f.b = f.b[:0]
	f.dropped = 0
	f.set = false
}

func (f *field) add(p []byte) {
	if room := f.max - len(f.b); len(p) > room {
		f.b = append(f.b, p[:room]...)
		f.dropped += int64(len(p) - room)
		return
	}
	f.b = append(f.b, p...)
}

func (f *field) addByte(c byte) {
	if len(f.b) >= f.max {
		f.dropped++
		return
	}
	f.b = append(f.b, c)
}

// parseEntry decodes one line of `journalctl --output=json` (with or
// without its newline). See decoder.decode for what it accepts.
func parseEntry(line []byte) (entry, error) {
	d := newDecoder(bufio.NewReader(bytes.NewReader(line)))
	var e entry
	err := d.decode(&e)
	if err == io.EOF {
		err = errSyntax // an empty line is not an entry
	}
	return e, err
}

// decoder reads journalctl's JSON output (one object per line) from a
// buffered reader without holding a whole line: values of the fields a log
// line needs are decoded into capped buffers, every other value is
// skipped as it streams past. Memory is therefore bounded by the bufio
// buffer and the caps, whatever journalctl prints.
//
// The value forms are journalctl's: a string, an array of byte values
// (0-255) for data that is not printable UTF-8, null for data it did not
// print, and an array of those forms for a field that occurs several times
// in one entry (the first value is taken, as `journalctl -o short` does).
type decoder struct {
	r    *bufio.Reader
	key  field
	ts   field // __REALTIME_TIMESTAMP
	last byte  // the last byte read: '\n' means the line is consumed
}

func newDecoder(r *bufio.Reader) *decoder {
	return &decoder{r: r, key: field{max: maxKey}, ts: field{max: maxTimestamp}}
}

func (d *decoder) next() (byte, error) {
	c, err := d.r.ReadByte()
	if err == nil {
		d.last = c
	}
	return c, err
}

// ws returns the next byte that is not JSON white space. A newline is not
// white space here: journalctl never breaks an object across lines, and
// stopping at it keeps the decoder in step with the lines.
func (d *decoder) ws() (byte, error) {
	for {
		c, err := d.next()
		if err != nil || (c != ' ' && c != '\t' && c != '\r') {
			return c, err
		}
	}
}

// skipLine consumes the rest of the current line after a syntax error.
func (d *decoder) skipLine() error {
	if d.last == '\n' {
		return nil
	}
	for {
		b, err := d.r.ReadSlice('\n')
		if len(b) > 0 {
			d.last = b[len(b)-1]
		}
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

// decode reads the next entry into e, reusing e's buffers. It returns
// io.EOF at the end of the input, errSyntax (after which skipLine resyncs)
// for a malformed line, and read errors as they come. Blank lines are
// skipped. An entry without a valid __REALTIME_TIMESTAMP is errSyntax.
func (d *decoder) decode(e *entry) error {
	e.usec = 0
	if e.unit.max == 0 {
		e.unit.max, e.message.max = maxUnit, maxMessage
	}
	e.unit.reset()
	e.message.reset()
	ts := &d.ts
	ts.reset()

	d.last = '\n'
	c, err := d.ws()
	for err == nil && c == '\n' {
		c, err = d.ws()
	}
	if err != nil {
		return err // io.EOF here is the clean end of the input
	}
	if c != '{' {
		return errSyntax
	}
	if c, err = d.ws(); err != nil {
		return d.eof(err)
	}
	if c != '}' {
		for {
			if c != '"' {
				return errSyntax
			}
			d.key.reset()
			if err := d.str(&d.key); err != nil {
				return d.eof(err)
			}
			var f *field
			if d.key.dropped == 0 {
				switch string(d.key.b) {
				case "MESSAGE":
					f = &e.message
				case "_SYSTEMD_UNIT":
					f = &e.unit
				case "__REALTIME_TIMESTAMP":
					f = ts
				}
			}
			if c, err = d.ws(); err != nil {
				return d.eof(err)
			}
			if c != ':' {
				return errSyntax
			}
			if c, err = d.ws(); err != nil {
				return d.eof(err)
			}
			if f == nil {
				err = d.skipValue(c)
			} else {
				f.reset() // a repeated key: the last one wins, as in encoding/json
				err = d.value(c, f, true)
			}
			if err != nil {
				return d.eof(err)
			}
			if c, err = d.ws(); err != nil {
				return d.eof(err)
			}
			if c == '}' {
				break
			}
			if c != ',' {
				return errSyntax
			}
			if c, err = d.ws(); err != nil {
				return d.eof(err)
			}
		}
	}
	// Only white space may follow the object on its line.
	switch c, err = d.ws(); {
	case err == io.EOF:
	case err != nil:
		return err
	case c != '\n':
		return errSyntax
	}
	usec, ok := parseUsec(*ts)
	if !ok {
		return errSyntax
	}
	e.usec = usec
	return nil
}

// eof turns an end of input inside an object into a syntax error: the
// object is incomplete, and there is nothing left to resync to.
func (d *decoder) eof(err error) error {
	if err == io.EOF {
		return errSyntax
	}
	return err
}

func parseUsec(f field) (int64, bool) {
	if !f.set || f.dropped > 0 || len(f.b) == 0 || len(f.b) > 18 {
		return 0, false // 18 digits: up to year 33658, and no overflow
	}
	var n int64
	for _, c := range f.b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// value decodes a value starting with c into f. top is false for the
// elements of a multi-value array, which may not nest further.
func (d *decoder) value(c byte, f *field, top bool) error {
	switch {
	case c == '"':
		f.set = true
		return d.str(f)
	case c == '[':
		return d.array(f, top)
	default:
		return d.skipValue(c) // null, or a form journalctl does not print
	}
}

// array decodes an array of byte values into f, or takes the first value
// of a multi-value array. Any other array leaves f unset.
func (d *decoder) array(f *field, top bool) error {
	c, err := d.ws()
	if err != nil {
		return err
	}
	if c == ']' {
		f.set = true // no bytes
		return nil
	}
	if c == '-' || (c >= '0' && c <= '9') {
		return d.bytes(c, f)
	}
	if top && (c == '"' || c == '[') {
		if err := d.value(c, f, false); err != nil {
			return err
		}
		return d.skipRest()
	}
	if err := d.skipValue(c); err != nil {
		return err
	}
	return d.skipRest()
}

// bytes decodes the rest of an array of numbers, c being the first byte
// of the first one. It sets f only when every element is an integer in
// 0-255 written plainly (as journalctl writes them).
func (d *decoder) bytes(c byte, f *field) error {
	ok := true
	for {
		v, valid, next, err := d.number(c)
		if err != nil {
			return err
		}
		if valid && v <= 255 {
			f.addByte(byte(v))
		} else {
			ok = false
		}
		c = next
		if c == ' ' || c == '\t' || c == '\r' {
			if c, err = d.ws(); err != nil {
				return err
			}
		}
		if c == ']' {
			break
		}
		if c != ',' {
			return errSyntax
		}
		if c, err = d.ws(); err != nil {
			return err
		}
		if c != '-' && (c < '0' || c > '9') {
			// Not an array of numbers after all.
			ok = false
			if err := d.skipValue(c); err != nil {
				return err
			}
			if err := d.skipRest(); err != nil {
				return err
			}
			break
		}
	}
	if ok {
		f.set = true
	} else {
		f.reset()
	}
	return nil
}

// number reads a JSON number starting with c, checking its grammar as it
// streams. It returns the value when the number is a plain non-negative
// integer (saturating at 1000), and the byte after the number.
func (d *decoder) number(c byte) (v int, plain bool, next byte, err error) {
	digits := func() (int, error) {
		n := 0
		for next >= '0' && next <= '9' {
			if v < 1000 {
				v = v*10 + int(next-'0')
			}
			n++
			if next, err = d.next(); err != nil {
				return n, err
			}
		}
		return n, nil
	}
	plain = true
	next = c
	if next == '-' {
		plain = false
		if next, err = d.next(); err != nil {
			return
		}
	}
	switch {
	case next == '0':
		if next, err = d.next(); err != nil {
			return
		}
	case next >= '1' && next <= '9':
		if _, err = digits(); err != nil {
			return
		}
	default:
		return 0, false, next, errSyntax
	}
	if next == '.' {
		plain = false
		if next, err = d.next(); err != nil {
			return
		}
		n, err2 := digits()
		if err = err2; err != nil {
			return
		}
		if n == 0 {
			return 0, false, next, errSyntax
		}
	}
	if next == 'e' || next == 'E' {
		plain = false
		if next, err = d.next(); err != nil {
			return
		}
		if next == '+' || next == '-' {
			if next, err = d.next(); err != nil {
				return
			}
		}
		n, err2 := digits()
		if err = err2; err != nil {
			return
		}
		if n == 0 {
			return 0, false, next, errSyntax
		}
	}
	return v, plain, next, nil
}

// str decodes the rest of a JSON string (after its opening quote) into f.
// Raw bytes are kept as they are, even when they are not valid UTF-8
// (journalctl never prints such strings; the line formatter escapes them).
func (d *decoder) str(f *field) error {
	for {
		// Copy the run of plain bytes already buffered in one go.
		if n := d.r.Buffered(); n > 0 {
			buf, _ := d.r.Peek(n)
			i := 0
			for i < len(buf) && buf[i] != '"' && buf[i] != '\\' && buf[i] >= 0x20 {
				i++
			}
			if i > 0 {
				f.add(buf[:i])
				d.last = buf[i-1]
				d.r.Discard(i)
			}
		}
		c, err := d.next()
		if err != nil {
			return err
		}
		switch {
		case c == '"':
			return nil
		case c < 0x20:
			return errSyntax
		case c != '\\':
			f.addByte(c)
			continue
		}
		if c, err = d.next(); err != nil {
			return err
		}
		switch c {
		case '"', '\\', '/':
			f.addByte(c)
		case 'b':
			f.addByte('\b')
		case 'f':
			f.addByte('\f')
		case 'n':
			f.addByte('\n')
		case 'r':
			f.addByte('\r')
		case 't':
			f.addByte('\t')
		case 'u':
			if err := d.unicode(f); err != nil {
				return err
			}
		default:
			return errSyntax
		}
	}
}

// unicode decodes a \uXXXX escape (and the low half of a surrogate pair
// after it). A lone surrogate becomes U+FFFD, as in encoding/json.
func (d *decoder) unicode(f *field) error {
	r, err := d.hex4()
	if err != nil {
		return err
	}
	if utf16.IsSurrogate(r) {
		hi := r
		r = utf8.RuneError
		// A pair is two escapes in a row; peek, so that whatever follows a
		// lone surrogate is decoded normally.
		if p, _ := d.r.Peek(6); len(p) == 6 && p[0] == '\\' && p[1] == 'u' {
			if lo, ok := hexRune(p[2:6]); ok {
				if pair := utf16.DecodeRune(hi, lo); pair != utf8.RuneError {
					d.last = p[5]
					d.r.Discard(6)
					r = pair
				}
			}
		}
	}
	var b [utf8.UTFMax]byte
	f.add(b[:utf8.EncodeRune(b[:], r)])
	return nil
}

func (d *decoder) hex4() (rune, error) {
	var h [4]byte
	for i := range h {
		c, err := d.next()
		if err != nil {
			return 0, err
		}
		h[i] = c
	}
	r, ok := hexRune(h[:])
	if !ok {
		return 0, errSyntax
	}
	return r, nil
}

func hexRune(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipValue skips a value starting with c: a string, a literal or number,
// or a whole array or object (nesting is counted, not recursed into).
func (d *decoder) skipValue(c byte) error {
	switch {
	case c == '"':
		return d.skipString()
	case c == '[' || c == '{':
		return d.skipNested(1)
	case c == '-' || (c >= '0' && c <= '9'):
		_, _, next, err := d.number(c)
		if err != nil {
			return err
		}
		return d.unread(next)
	case c == 'n' || c == 't' || c == 'f':
		return d.literal(c)
	}
	return errSyntax
}

// unread steps back over the byte that ended a number.
func (d *decoder) unread(c byte) error {
	if err := d.r.UnreadByte(); err != nil {
		return err
	}
	if c == '\n' {
		d.last = 0
	}
	return nil
}

func (d *decoder) literal(c byte) error {
	var want string
	switch c {
	case 'n':
		want = "ull"
	case 't':
		want = "rue"
	default:
		want = "alse"
	}
	for i := 0; i < len(want); i++ {
		b, err := d.next()
		if err != nil {
			return err
		}
		if b != want[i] {
			return errSyntax
		}
	}
	return nil
}

func (d *decoder) skipString() error {
	var sink field // max 0: counts, keeps nothing
	return d.str(&sink)
}

// skipRest skips the remaining elements of an array after its first.
func (d *decoder) skipRest() error {
	for {
		c, err := d.ws()
		if err != nil {
			return err
		}
		if c == ']' {
			return nil
		}
		if c != ',' {
			return errSyntax
		}
		if c, err = d.ws(); err != nil {
			return err
		}
		if err := d.skipValue(c); err != nil {
			return err
		}
	}
}

// skipNested skips to the end of depth open arrays or objects. Only
// strings are parsed inside: the decoder is strict about the fields it
// reads, lenient about the shape of the ones it skips.
func (d *decoder) skipNested(depth int) error {
	for depth > 0 {
		c, err := d.next()
		if err != nil {
			return err
		}
		switch c {
		case '"':
			if err := d.skipString(); err != nil {
				return err
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case '\n':
			return errSyntax
		}
	}
	return nil
}
