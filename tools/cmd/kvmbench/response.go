package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Limits of the response reader. kvmd's answers are tiny; these only keep a
// misbehaving server from making the driver allocate without bound.
const (
	maxKeptBody   = 4 << 10 // body bytes kept for error reports; the rest is discarded
	maxHeaderLine = 100     // header lines per response
	readBufSize   = 16 << 10
)

var errConnClosed = errors.New("connection closed by server")

// response is one parsed HTTP/1.x response. Body holds at most maxKeptBody
// bytes and is only valid until the next read.
type response struct {
	Status int
	Body   []byte
	// Close is set when the server will close the connection after this
	// response (Connection: close, or a body delimited by EOF).
	Close bool
}

// respReader reads HTTP/1.1 responses from a keep-alive connection without
// allocating per response: it parses the status line, scans headers up to the
// empty line for Content-Length, Transfer-Encoding and Connection, and
// consumes a Content-Length or chunked body.
type respReader struct {
	br   *bufio.Reader
	body []byte
}

func newRespReader(r io.Reader) *respReader {
	return &respReader{br: bufio.NewReaderSize(r, readBufSize), body: make([]byte, 0, 512)}
}

var (
	hdrContentLength    = []byte("Content-Length")
	hdrTransferEncoding = []byte("Transfer-Encoding")
	hdrConnection       = []byte("Connection")
)

// read reads one final response; interim 1xx responses are skipped.
func (r *respReader) read() (response, error) {
	for interim := 0; interim < 10; interim++ {
		resp, err := r.readOne()
		if err != nil || resp.Status >= 200 {
			return resp, err
		}
	}
	return response{}, errors.New("too many 1xx responses")
}

func (r *respReader) readOne() (response, error) {
	r.body = r.body[:0]
	line, err := r.line()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) && len(line) == 0 {
			return response{}, errConnClosed
		}
		return response{}, fmt.Errorf("reading status line: %w", err)
	}
	status, err := parseStatusLine(line)
	if err != nil {
		return response{}, err
	}
	resp := response{Status: status}
	contentLength := int64(-1)
	chunked := false
	for n := 0; ; n++ {
		if n > maxHeaderLine {
			return resp, fmt.Errorf("more than %d header lines", maxHeaderLine)
		}
		line, err := r.line()
		if err != nil {
			return resp, fmt.Errorf("reading headers: %w", err)
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return resp, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, hdrContentLength):
			n, ok := parseDecimal(value)
			if !ok || (contentLength >= 0 && n != contentLength) {
				return resp, fmt.Errorf("bad Content-Length %q", value)
			}
			contentLength = n
		case bytes.EqualFold(name, hdrTransferEncoding):
			chunked = hasToken(value, "chunked")
		case bytes.EqualFold(name, hdrConnection):
			if hasToken(value, "close") {
				resp.Close = true
			}
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
		// No body, whatever the headers say.
	case chunked:
		err = r.chunkedBody()
	case contentLength >= 0:
		err = r.consume(contentLength)
	default:
		// Delimited by EOF: only possible on a connection the server closes.
		resp.Close = true
		err = r.untilEOF()
	}
	resp.Body = r.body
	if err != nil {
		return resp, fmt.Errorf("reading body: %w", err)
	}
	return resp, nil
}

// line returns the next line without its CRLF (or bare LF). The slice points
// into the bufio buffer and is valid until the next read.
func (r *respReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("line longer than %d bytes", readBufSize)
	case errors.Is(err, io.EOF):
		return line, io.ErrUnexpectedEOF
	case err != nil:
		return line, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// consume reads n body bytes, keeping the first maxKeptBody of them.
func (r *respReader) consume(n int64) error {
	for n > 0 {
		avail := r.br.Buffered()
		if avail == 0 {
			if _, err := r.br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					return io.ErrUnexpectedEOF
				}
				return err
			}
			continue
		}
		take := int(min(n, int64(avail)))
		b, _ := r.br.Peek(take)
		r.keep(b)
		_, _ = r.br.Discard(take) // cannot fail: the bytes are buffered
		n -= int64(take)
	}
	return nil
}

func (r *respReader) keep(b []byte) {
	if room := maxKeptBody - len(r.body); room > 0 {
		r.body = append(r.body, b[:min(room, len(b))]...)
	}
}

func (r *respReader) chunkedBody() error {
	// A body of more than a million chunks is not something kvmd sends.
	for range 1 << 20 {
		line, err := r.line()
		if err != nil {
			return fmt.Errorf("chunk size: %w", err)
		}
		sizeField, _, _ := bytes.Cut(line, []byte(";"))
		size, ok := parseHex(bytes.TrimSpace(sizeField))
		if !ok {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if size == 0 {
			for n := 0; ; n++ { // trailers up to the empty line
				if n > maxHeaderLine {
					return errors.New("too many trailer lines")
				}
				line, err := r.line()
				if err != nil {
					return fmt.Errorf("trailers: %w", err)
				}
				if len(line) == 0 {
					return nil
				}
			}
		}
		if err := r.consume(size); err != nil {
			return err
		}
		line, err = r.line()
		if err != nil {
			return fmt.Errorf("chunk end: %w", err)
		}
		if len(line) != 0 {
			return fmt.Errorf("chunk not followed by CRLF: %q", line)
		}
	}
	return errors.New("too many chunks")
}

func (r *respReader) untilEOF() error {
	const maxEOFBody = 64 << 20
	for read := 0; read < maxEOFBody; {
		if _, err := r.br.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := r.br.Buffered()
		b, _ := r.br.Peek(n)
		r.keep(b)
		_, _ = r.br.Discard(n)
		read += n
	}
	return fmt.Errorf("body delimited by EOF longer than %d bytes", maxEOFBody)
}

// parseStatusLine parses "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (int, error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("malformed status line %q", line)
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	return code, nil
}

func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// hasToken reports whether the comma-separated header value lists token.
func hasToken(value []byte, token string) bool {
	for part := range bytes.SplitSeq(value, []byte(",")) {
		if bytes.EqualFold(bytes.TrimSpace(part), []byte(token)) {
			return true
		}
	}
	return false
}
