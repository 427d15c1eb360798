package export

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrSyntax reports input that is not in the export format. Nothing after
// it can be trusted to be framed right, so a Reader stops there.
var ErrSyntax = errors.New("export: malformed input")

// maxName is the longest field name systemd accepts (64 bytes).
const maxName = 64

// bufferSize is the buffer NewReader gives a reader that has none: text
// fields longer than this are read in pieces.
const bufferSize = 64 << 10

// Reader reads entries in the export format (`journalctl --output=export`
// prints it) one field at a time. It holds no more of a value than its
// caller asks for: what is not read is skipped as it streams past, so a
// field of any size costs the buffer and no more.
//
// The framing is checked strictly (field names, lengths, the newline
// after a binary value); a break in it is ErrSyntax, and an input that
// ends inside an entry is io.ErrUnexpectedEOF. Either ends the reading.
type Reader struct {
	br *bufio.Reader

	name    [maxName]byte
	nameLen int
	inEntry bool // a field of the current entry has been read

	// What is left of the current field's value.
	text     []byte // text form: its bytes in br's buffer, until the next read
	textMore bool   // text form: more bytes follow text, up to a newline
	bin      int64  // binary form: bytes not yet read
	binEnd   bool   // binary form: the newline after the value is not yet read

	err error // sticky: ErrSyntax, io.ErrUnexpectedEOF, io.EOF or a read error
}

// NewReader returns a Reader of r. It reads through r itself when r is a
// *bufio.Reader of at least 64 KiB, so that its caller may Peek at what is
// buffered.
func NewReader(r io.Reader) *Reader { return newReaderSize(r, bufferSize) }

// newReaderSize is NewReader with a smaller buffer, for tests: at least
// 128 bytes, so that a name line always fits.
func newReaderSize(r io.Reader, size int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, max(size, 128))}
}

// Next skips what is left of the current field and reads the next field's
// name, which stays valid until the next call. At the empty line that ends
// an entry it returns a nil name and a nil error; the call after that
// starts the next entry. At the end of the input between entries it
// returns io.EOF.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if err := r.consume(nil, 0, nil); err != nil {
		return nil, r.fail(err)
	}
	line, err := r.br.ReadSlice('\n')
	switch {
	case err == nil:
		if len(line) == 1 {
			r.inEntry = false
			return nil, nil
		}
	case err == bufio.ErrBufferFull:
		// A text field longer than the buffer; its name is in this part.
	case err == io.EOF && len(line) == 0 && !r.inEntry:
		r.err = io.EOF
		return nil, io.EOF
	case err == io.EOF:
		return nil, r.fail(io.ErrUnexpectedEOF)
	default:
		return nil, r.fail(err)
	}
	r.inEntry = true
	if eq := bytes.IndexByte(line[:min(len(line), maxName+1)], '='); eq >= 0 {
		// NAME=value\n
		if err := r.setName(line[:eq]); err != nil {
			return nil, r.fail(err)
		}
		r.text, r.textMore = line[eq+1:], err == bufio.ErrBufferFull
		if !r.textMore {
			r.text = r.text[:len(r.text)-1]
		}
		return r.name[:r.nameLen], nil
	}
	// NAME\n, a 64-bit little-endian length, the value, \n
	if err != nil {
		return nil, r.fail(fmt.Errorf("%w: field name too long", ErrSyntax))
	}
	if err := r.setName(line[:len(line)-1]); err != nil {
		return nil, r.fail(err)
	}
	size, err := r.br.Peek(8)
	if err != nil {
		return nil, r.fail(eof(err))
	}
	n := binary.LittleEndian.Uint64(size)
	r.br.Discard(8)
	if n > math.MaxInt64 {
		return nil, r.fail(fmt.Errorf("%w: field %s of %d bytes", ErrSyntax, r.name[:r.nameLen], n))
	}
	r.bin, r.binEnd = int64(n), true
	return r.name[:r.nameLen], nil
}

// Value appends the current field's value to dst, at most max bytes of it
// (the rest is skipped), and returns dst and the size of the whole value.
// A second call for the same field returns dst and 0.
func (r *Reader) Value(dst []byte, max int) ([]byte, int64, error) {
	if r.err != nil {
		return dst, 0, r.err
	}
	var n int64
	if err := r.consume(&dst, max, &n); err != nil {
		return dst, n, r.fail(err)
	}
	return dst, n, nil
}

// Ready tells whether the next entry is wholly buffered, so that reading
// it through will not wait for input. Call it between entries.
func (r *Reader) Ready() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	for {
		nl := bytes.IndexByte(b, '\n')
		switch {
		case nl < 0:
			return false
		case nl == 0:
			return true // the empty line that ends the entry
		case bytes.IndexByte(b[:min(nl, maxName+1)], '=') >= 0:
			b = b[nl+1:]
			continue
		}
		b = b[nl+1:]
		if len(b) < 8 {
			return false
		}
		n := binary.LittleEndian.Uint64(b)
		if n >= uint64(len(b)-8) {
			return false // the value and its newline are not all there
		}
		b = b[8+n+1:]
	}
}

func (r *Reader) setName(name []byte) error {
	if !validName(name) {
		return fmt.Errorf("%w: bad field name %q", ErrSyntax, name[:min(len(name), maxName+1)])
	}
	r.nameLen = copy(r.name[:], name)
	return nil
}

// consume reads what is left of the current field's value, appending at
// most max bytes of it to *dst when dst is not nil, and adding its size to
// *n when n is not nil.
func (r *Reader) consume(dst *[]byte, max int, n *int64) error {
	var start int // where the value begins in dst
	if dst != nil {
		start = len(*dst)
	}
	add := func(p []byte) {
		if n != nil {
			*n += int64(len(p))
		}
		if dst != nil {
			if room := max - (len(*dst) - start); room > 0 {
				*dst = append(*dst, p[:min(room, len(p))]...)
			}
		}
	}
	if r.text != nil || r.textMore {
		add(r.text)
		r.text = nil
		for r.textMore {
			part, err := r.br.ReadSlice('\n')
			switch err {
			case nil:
				part = part[:len(part)-1]
				r.textMore = false
			case bufio.ErrBufferFull:
			default:
				return eof(err)
			}
			add(part)
		}
		return nil
	}
	for r.bin > 0 {
		part, err := r.br.Peek(int(min(r.bin, int64(r.br.Size()))))
		if len(part) == 0 {
			return eof(err)
		}
		add(part)
		r.br.Discard(len(part))
		r.bin -= int64(len(part))
	}
	if r.binEnd {
		c, err := r.br.ReadByte()
		if err != nil {
			return eof(err)
		}
		if c != '\n' {
			return fmt.Errorf("%w: no newline after the value of %s", ErrSyntax, r.name[:r.nameLen])
		}
		r.binEnd = false
	}
	return nil
}

// fail makes err the reader's last word.
func (r *Reader) fail(err error) error {
	r.err = err
	r.text, r.textMore, r.bin, r.binEnd = nil, false, 0, false
	return err
}

// eof turns an end of input inside an entry into io.ErrUnexpectedEOF.
func eof(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
